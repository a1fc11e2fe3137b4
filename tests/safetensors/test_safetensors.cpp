// harness/safetensors: round trips through the writer and reader, files built
// byte by byte from the format's definition (so the reader is not only
// checked against its own writer, nor the writer against its own reader), and
// every malformed file rejected with a message naming the file and the tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/safetensors.hpp"

namespace fs = std::filesystem;
using namespace mw::st;

namespace {

// A fresh folder per test (ctest runs each test as its own process, in parallel).
class Safetensors : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("memwall-st-" + std::to_string(::getpid()) + "-" + info->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    fs::path path(const std::string& name) const { return dir_ / name; }

    // Writes `bytes` as a file and returns its path.
    fs::path write(const std::string& name, const std::string& bytes) const {
        const fs::path p = path(name);
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }

    // Loading `bytes` must fail with a FormatError whose message names the
    // file and contains every one of `parts`.
    void expect_rejected(const std::string& bytes, const std::vector<std::string>& parts) const {
        const fs::path p = write("bad.safetensors", bytes);
        try {
            load(p);
            ADD_FAILURE() << "accepted a file that should be rejected for: " << parts.front();
        } catch (const FormatError& e) {
            const std::string msg = e.what();
            std::printf("  [message] %s\n", msg.c_str());
            EXPECT_NE(msg.find(p.string()), std::string::npos) << "message does not name the file: " << msg;
            for (const auto& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
        }
    }

    fs::path dir_;
};

// The 8-byte little-endian length, written out byte by byte.
std::string le64(std::uint64_t v) {
    std::string s;
    for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xFF));
    return s;
}

// A file: the length prefix, the header as given, then the data.
std::string file_of(const std::string& header, const std::string& data = "") { return le64(header.size()) + header + data; }

Tensor raw(std::string name, DType t, std::vector<std::int64_t> shape, std::size_t nbytes, int seed) {
    Tensor x{std::move(name), t, std::move(shape), std::vector<std::byte>(nbytes)};
    for (std::size_t i = 0; i < nbytes; ++i) x.data[i] = std::byte((i * 37 + seed * 11 + 5) & 0xFF);
    return x;
}

// --- round trips ---------------------------------------------------------------------

TEST_F(Safetensors, RoundTripKeepsTensorsAndMetadata) {
    File f;
    f.metadata = {{"format", "memwall"}, {"step", "12"}, {"note", "üñí \"quoted\"\n"}};
    const std::vector<float> w = {1.5f, -2.0f, 0.0f, 3.25e-8f, -0.0f, 1e30f};
    f.tensors.push_back(make_f32("layers.0.w", {2, 3}, w));
    const float s = 42.0f;
    f.tensors.push_back(make_f32("scalar", {}, {&s, 1}));  // 0-d: one element
    f.tensors.push_back(make_f32("one", {1}, {&s, 1}));
    f.tensors.push_back(make_f32("empty", {0, 4}, {}));  // owns no bytes
    f.tensors.push_back(raw("f64", DType::F64, {3}, 24, 1));
    f.tensors.push_back(raw("i32", DType::I32, {2, 2}, 16, 2));
    f.tensors.push_back(raw("u8", DType::U8, {5}, 5, 3));
    f.tensors.push_back(raw("bf16", DType::BF16, {3}, 6, 4));
    f.tensors.push_back(raw("f16", DType::F16, {1, 1, 1}, 2, 5));
    const fs::path p = path("model.safetensors");
    save(p, f);

    const File g = load(p);
    EXPECT_EQ(g.source, p.string());
    EXPECT_EQ(g.metadata, f.metadata);
    ASSERT_EQ(g.tensors.size(), f.tensors.size());
    for (const auto& t : f.tensors) {
        const Tensor* u = g.find(t.name);
        ASSERT_NE(u, nullptr) << t.name;
        EXPECT_EQ(u->dtype, t.dtype) << t.name;
        EXPECT_EQ(u->shape, t.shape) << t.name;
        EXPECT_EQ(u->data, t.data) << t.name;
    }
    const auto back = expect_f32(g, "layers.0.w", {2, 3});
    ASSERT_EQ(back.size(), w.size());
    for (std::size_t i = 0; i < w.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint32_t>(back[i]), std::bit_cast<std::uint32_t>(w[i]));
    EXPECT_EQ(expect_f32(g, "scalar", {})[0], 42.0f);
    EXPECT_EQ(g.find("scalar")->numel(), 1);
    EXPECT_EQ(expect_f32(g, "empty", {0, 4}).size(), 0u);
    EXPECT_EQ(g.find("nothing"), nullptr);

    // Saving what was loaded gives the same bytes (the layout is a function of the contents).
    const fs::path q = path("again.safetensors");
    save(q, g);
    std::ifstream a(p, std::ios::binary), b(q, std::ios::binary);
    const std::string sa((std::istreambuf_iterator<char>(a)), {}), sb((std::istreambuf_iterator<char>(b)), {});
    EXPECT_EQ(sa, sb);
}

TEST_F(Safetensors, LayoutIsAlignedAndTiled) {
    File f;
    f.tensors.push_back(raw("a_u8", DType::U8, {3}, 3, 1));
    f.tensors.push_back(raw("b_f64", DType::F64, {2}, 16, 2));
    f.tensors.push_back(raw("c_f16", DType::F16, {3}, 6, 3));
    f.tensors.push_back(raw("d_f32", DType::F32, {1}, 4, 4));
    const std::string bytes = serialize(f);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    EXPECT_EQ(n % 8, 0u) << "header padded to 8 bytes, so the data starts aligned";
    // Largest element first: f64 at 0, f32 at 16, f16 at 20, u8 at 26; the header says so.
    const std::string header = bytes.substr(8, n);
    EXPECT_NE(header.find(R"("b_f64":{"dtype":"F64","shape":[2],"data_offsets":[0,16]})"), std::string::npos) << header;
    EXPECT_NE(header.find(R"("d_f32":{"dtype":"F32","shape":[1],"data_offsets":[16,20]})"), std::string::npos) << header;
    EXPECT_NE(header.find(R"("c_f16":{"dtype":"F16","shape":[3],"data_offsets":[20,26]})"), std::string::npos) << header;
    EXPECT_NE(header.find(R"("a_u8":{"dtype":"U8","shape":[3],"data_offsets":[26,29]})"), std::string::npos) << header;
    EXPECT_EQ(bytes.size(), 8 + n + 29);
    EXPECT_EQ(header.find_last_not_of(' ') + 1, header.find_last_of('}') + 1) << "only spaces after the object";
}

// The writer's bytes for a small file, spelled out from the format: the
// length, the JSON, the padding, then 1.0f and 2.0f little-endian.
TEST_F(Safetensors, WriterMatchesTheFormatByteForByte) {
    File f;
    const float v[] = {1.0f, 2.0f};
    f.tensors.push_back(make_f32("w", {2}, v));
    f.metadata["k"] = "v";
    const std::string json = R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    ASSERT_EQ(json.size(), 79u);
    std::string expected("\x50\x00\x00\x00\x00\x00\x00\x00", 8);  // 80 = 79 + 1 space of padding
    expected += json + " ";
    expected += std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f = 0x3f800000, 2.0f = 0x40000000
    EXPECT_EQ(serialize(f), expected);
}

// A file written by hand from the format: keys in no particular order, the
// metadata last, whitespace inside the JSON, padding, a 0-d I32 and an empty
// tensor; data in an order unrelated to the header's.
TEST_F(Safetensors, ReadsAHandBuiltFile) {
    const std::string header =
        "{ \"b\" : {\"data_offsets\": [4, 12], \"shape\": [2], \"dtype\": \"F32\"},\n"
        "  \"z\": {\"dtype\": \"BF16\", \"shape\": [3, 0], \"data_offsets\": [12, 12]},\n"
        "  \"a\": {\"shape\": [], \"dtype\": \"I32\", \"data_offsets\": [0, 4]},\n"
        "  \"__metadata__\": {\"format\": \"pt\"} }      ";
    std::string data;
    data += std::string("\x07\x00\x00\x00", 4);  // a = int32 7
    data += std::string("\x00\x00\xc0\x3f", 4);  // b[0] = 1.5f = 0x3fc00000
    data += std::string("\x00\x00\x00\xc0", 4);  // b[1] = -2.0f = 0xc0000000
    const File f = load(write("hand.safetensors", file_of(header, data)));
    EXPECT_EQ(f.metadata.at("format"), "pt");
    ASSERT_EQ(f.tensors.size(), 3u);
    EXPECT_EQ(f.tensors[0].name, "a") << "tensors come in file order";
    const auto b = expect_f32(f, "b", {2});
    EXPECT_EQ(b[0], 1.5f);
    EXPECT_EQ(b[1], -2.0f);
    const Tensor& a = expect(f, "a", DType::I32, {});
    std::int32_t av = 0;
    std::memcpy(&av, a.data.data(), 4);
    EXPECT_EQ(av, 7);
    EXPECT_EQ(expect(f, "z", DType::BF16, {3, 0}).data.size(), 0u);
}

TEST_F(Safetensors, ReadsAFileWithNoTensors) {
    const File f = load(write("empty.safetensors", file_of("{}      ")));
    EXPECT_TRUE(f.tensors.empty());
    EXPECT_TRUE(f.metadata.empty());
}

// --- the reader's refusals --------------------------------------------------------------

TEST_F(Safetensors, RejectsMissingAndShortFiles) {
    try {
        load(path("absent.safetensors"));
        ADD_FAILURE() << "loaded a missing file";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find(path("absent.safetensors").string() + ": no such file"), std::string::npos) << e.what();
    }
    expect_rejected("", {"0 bytes long", "shorter than the 8-byte header length"});
    expect_rejected(std::string("\x05\x00\x00", 3), {"3 bytes long"});
}

TEST_F(Safetensors, RejectsHeaderLengths) {
    expect_rejected(le64(100) + "{}", {"header length 100 runs past the end of the file (10 bytes)"});
    expect_rejected(le64(100'000'001) + "{}", {"header length 100000001 is over the limit of 100000000 bytes"});
    expect_rejected(le64(~0ull) + "{}", {"is over the limit"});
}

TEST_F(Safetensors, RejectsHeadersThatAreNotJsonObjects) {
    expect_rejected(file_of("{\"a\": {\"dtype\": "), {"the header is not valid JSON"});
    expect_rejected(file_of("{\"a\": 1} trailing"), {"not valid JSON"});
    expect_rejected(file_of(""), {"not valid JSON"});
    expect_rejected(file_of("[1, 2]"), {"the header is an array, not a JSON object"});
    expect_rejected(file_of("\"text\""), {"the header is a string, not a JSON object"});
    expect_rejected(file_of("  {}"), {"must start with '{'"});
    expect_rejected(file_of("{\"\xff\": {}}"), {"not valid JSON"});  // not UTF-8
}

TEST_F(Safetensors, RejectsMalformedEntries) {
    const std::string d8(8, '\0');
    expect_rejected(file_of(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", d8), {"tensor 'w'", "has no dtype"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", d8), {"tensor 'w'", "has no shape"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [2]}})", d8), {"tensor 'w'", "has no data_offsets"});
    expect_rejected(file_of(R"({"w": [1, 2]})", d8), {"tensor 'w'", "not an object"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}})", d8),
                    {"tensor 'w'", "unexpected key 'x'"});
    expect_rejected(file_of(R"({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", d8),
                    {"tensor 'w'", "dtype is the number 4, not a string"});
    expect_rejected(file_of(R"({"w": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}})", d8),
                    {"tensor 'w'", "unknown dtype 'F8_E4M3'", "F32"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", d8),
                    {"tensor 'w'", "shape holds the number -2, not a non-negative integer"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", d8),
                    {"tensor 'w'", "shape holds the number 2.0"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", d8),
                    {"tensor 'w'", "shape is the number 2, not an array"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", d8),
                    {"tensor 'w'", "data_offsets has 1 numbers, not 2"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d8),
                    {"names 'w' twice", "duplicate"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", d8),
                    {"entry of 'w' has the key 'dtype' twice"});
    expect_rejected(file_of(R"({"__metadata__": {"k": 1}})"), {"__metadata__ 'k' is the number 1, not a string"});
    expect_rejected(file_of(R"({"__metadata__": ["k"]})"), {"__metadata__ is an array"});
}

TEST_F(Safetensors, RejectsBadOffsets) {
    const std::string d8(8, '\0'), d12(12, '\0');
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", d8),
                    {"tensor 'w'", "data_offsets [8, 4] end before they begin"});
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}})", d8),
                    {"tensor 'w'", "data_offsets [0, 12] run past the end of the data (8 bytes after the header)"});
    // A truncated file: the same, found from the data's side.
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", std::string(7, '\0')),
                    {"tensor 'w'", "run past the end of the data (7 bytes"});
    expect_rejected(file_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", d12),
                    {"tensors 'a' [0, 8) and 'b' [4, 12) overlap"});
    expect_rejected(file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", d12),
                    {"data bytes [4, 8) belong to no tensor", "gap before tensor 'b'"});
    expect_rejected(file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", d8),
                    {"data bytes [0, 4) belong to no tensor", "tensor 'a'"});
    expect_rejected(file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", d8),
                    {"data bytes [4, 8) at the end of the file belong to no tensor"});
    // An empty tensor inside another's bytes is an overlap too.
    expect_rejected(file_of(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})", d8),
                    {"'a' [0, 8) and 'e' [4, 4) overlap"});
}

TEST_F(Safetensors, RejectsSizesThatDoNotMatchTheShape) {
    expect_rejected(file_of(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::string(8, '\0')),
                    {"tensor 'w'", "data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12"});
    expect_rejected(file_of(R"({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 16]}})", std::string(16, '\0')),
                    {"tensor 'w'", "shape [2, 2] of BF16 needs 8"});
    expect_rejected(
        file_of(R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", std::string(8, '\0')),
        {"tensor 'w'", "needs more than 2^64"});
}

// --- what the caller expects of a valid file ------------------------------------------------

TEST_F(Safetensors, ExpectNamesTensorAndWhatDiffers) {
    File f;
    const float v[6] = {};
    f.tensors.push_back(make_f32("w", {2, 3}, v));
    f.tensors.push_back(raw("ids", DType::I32, {4}, 16, 1));
    const fs::path p = path("m.safetensors");
    save(p, f);
    const File g = load(p);
    auto message = [&](auto&& fn) {
        try {
            fn();
        } catch (const FormatError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    const std::string missing = message([&] { expect_f32(g, "layers.0.attn.q", {2, 3}); });
    EXPECT_NE(missing.find(p.string() + ": no tensor 'layers.0.attn.q' (the file has 2: "), std::string::npos) << missing;
    EXPECT_NE(missing.find("w"), std::string::npos) << missing;
    const std::string shape = message([&] { expect_f32(g, "w", {3, 2}); });
    EXPECT_NE(shape.find(p.string() + ": tensor 'w' has shape [2, 3], expected [3, 2]"), std::string::npos) << shape;
    const std::string rank = message([&] { expect_f32(g, "w", {6}); });
    EXPECT_NE(rank.find("has shape [2, 3], expected [6]"), std::string::npos) << rank;
    const std::string dtype = message([&] { expect_f32(g, "ids", {4}); });
    EXPECT_NE(dtype.find(p.string() + ": tensor 'ids' is I32, expected F32"), std::string::npos) << dtype;
    EXPECT_EQ(message([&] { expect(g, "ids", DType::I32, {4}); }), "(no error)");
}

TEST_F(Safetensors, WriterRefusesInconsistentTensors) {
    auto refuses = [&](File f, const std::string& part) {
        try {
            save(path("w.safetensors"), f);
            ADD_FAILURE() << "saved a file that should be refused: " << part;
        } catch (const FormatError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(part), std::string::npos) << msg;
            EXPECT_NE(msg.find(path("w.safetensors").string()), std::string::npos) << msg;
        }
        EXPECT_FALSE(fs::exists(path("w.safetensors"))) << "nothing written";
    };
    File size;
    size.tensors.push_back(raw("w", DType::F32, {3}, 8, 1));
    refuses(size, "tensor 'w': holds 8 bytes, but shape [3] of F32 needs 12");
    File twice;
    twice.tensors.push_back(raw("w", DType::U8, {1}, 1, 1));
    twice.tensors.push_back(raw("w", DType::U8, {1}, 1, 2));
    refuses(twice, "tensor 'w': two tensors have this name");
    File reserved;
    reserved.tensors.push_back(raw("__metadata__", DType::U8, {1}, 1, 1));
    refuses(reserved, "reserved");
    File negative;
    negative.tensors.push_back(raw("w", DType::U8, {-1}, 0, 1));
    refuses(negative, "tensor 'w': shape [-1] is negative or too large");
    EXPECT_THROW(make_f32("w", {2, 2}, std::vector<float>(3)), FormatError);
}

TEST(SafetensorsErrors, AreUsageErrorsForTheCli) {
    // The CLI maps mw::UsageError to exit status 2.
    static_assert(std::is_base_of_v<mw::UsageError, FormatError>);
    EXPECT_EQ(to_string(DType::BF16), "BF16");
    EXPECT_EQ(size_of(DType::F64), 8u);
    EXPECT_EQ(parse_dtype("I32"), DType::I32);
    EXPECT_EQ(parse_dtype("f32"), std::nullopt) << "names are case-sensitive";
}

}  // namespace
