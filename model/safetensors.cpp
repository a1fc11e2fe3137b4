#include "model/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/results.hpp"  // write_file_atomic

namespace mw::st {

// Tensor bytes are copied between the file and memory as they are, so this
// host must store numbers the way the file does. (The header length is
// encoded byte by byte and would not need it.)
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

struct DTypeInfo {
    DType type;
    std::string_view name;
    std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

const DTypeInfo& info(DType t) {
    for (const auto& d : kDTypes)
        if (d.type == t) return d;
    throw std::logic_error("safetensors: unhandled dtype");
}

std::string known_dtypes() {
    std::string s;
    for (const auto& d : kDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
    return s;
}

std::uint64_t read_le_u64(const char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

void append_le_u64(std::string& out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// numel * element size, or nullopt when it overflows 64 bits.
std::optional<std::uint64_t> byte_count(const std::vector<std::int64_t>& shape, std::size_t elem) {
    std::uint64_t n = elem;
    for (std::int64_t d : shape)
        if (d < 0 || __builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
    return n;
}

std::string in_quotes(std::string_view name) {
    std::string s(1, '\'');  // (not "'" + name + "'": GCC 12 warns falsely, -Wrestrict)
    s += name;
    s += '\'';
    return s;
}

// A JSON value's kind, for messages ("a string", "an array", ...).
std::string kind_of(const nlohmann::json& v) {
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    if (v.is_boolean()) return "a boolean";
    if (v.is_null()) return "null";
    if (v.is_number()) return "the number " + v.dump();
    return v.type_name();
}

// The header as JSON. nlohmann keeps the last of duplicate keys silently;
// the format forbids duplicates, so the parser callback watches for them.
nlohmann::json parse_header(std::string_view header, const std::string& source) {
    using nlohmann::json;
    std::vector<std::set<std::string>> open;  // keys seen in each enclosing object
    std::string top_key, duplicate;           // the tensor being parsed; the first duplicate found
    auto watch = [&](int depth, json::parse_event_t event, json& parsed) {
        switch (event) {
            case json::parse_event_t::object_start: open.emplace_back(); break;
            case json::parse_event_t::object_end:
                if (!open.empty()) open.pop_back();
                break;
            case json::parse_event_t::key: {
                const std::string key = parsed.get<std::string>();
                if (depth == 1) top_key = key;
                if (!open.empty() && !open.back().insert(key).second && duplicate.empty())
                    duplicate = depth == 1 ? "the header names " + in_quotes(key) + " twice"
                                           : "the entry of " + in_quotes(top_key) + " has the key " + in_quotes(key) + " twice";
                break;
            }
            default: break;
        }
        return true;
    };
    json doc;
    try {
        doc = json::parse(header.begin(), header.end(), watch);
    } catch (const json::parse_error& e) {
        throw FormatError(source + ": the header is not valid JSON (" + e.what() + ")");
    }
    if (!duplicate.empty()) throw FormatError(source + ": " + duplicate + " (duplicate keys are not allowed)");
    if (!doc.is_object()) throw FormatError(source + ": the header is " + kind_of(doc) + ", not a JSON object");
    return doc;
}

// A JSON array of non-negative integers, as int64; `what` names it in messages.
std::vector<std::int64_t> unsigned_list(const nlohmann::json& v, const std::string& what) {
    if (!v.is_array()) throw FormatError(what + " is " + kind_of(v) + ", not an array of non-negative integers");
    std::vector<std::int64_t> out;
    for (const auto& e : v) {
        if (!e.is_number_unsigned() || e.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
            throw FormatError(what + " holds " + kind_of(e) + ", not a non-negative integer");
        out.push_back(static_cast<std::int64_t>(e.get<std::uint64_t>()));
    }
    return out;
}

struct Entry {
    Tensor tensor;  // without its data yet
    std::uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& name, const nlohmann::json& v, const std::string& source) {
    const std::string where = source + ": tensor " + in_quotes(name);
    if (!v.is_object()) throw FormatError(where + ": its entry is " + kind_of(v) + ", not an object");
    for (const auto& [key, value] : v.items())
        if (key != "dtype" && key != "shape" && key != "data_offsets")
            throw FormatError(where + ": unexpected key " + in_quotes(key) + " (an entry has dtype, shape and data_offsets)");
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!v.contains(key)) throw FormatError(where + ": its entry has no " + key);

    Entry e;
    e.tensor.name = name;
    const auto& dt = v["dtype"];
    if (!dt.is_string()) throw FormatError(where + ": dtype is " + kind_of(dt) + ", not a string");
    const auto dtype = parse_dtype(dt.get<std::string>());
    if (!dtype)
        throw FormatError(where + ": unknown dtype " + in_quotes(dt.get<std::string>()) + " (known: " + known_dtypes() + ")");
    e.tensor.dtype = *dtype;
    try {
        e.tensor.shape = unsigned_list(v["shape"], "shape");
        const auto offsets = unsigned_list(v["data_offsets"], "data_offsets");
        if (offsets.size() != 2)
            throw FormatError("data_offsets has " + std::to_string(offsets.size()) + " numbers, not 2 ([begin, end])");
        e.begin = static_cast<std::uint64_t>(offsets[0]);
        e.end = static_cast<std::uint64_t>(offsets[1]);
    } catch (const FormatError& err) {
        throw FormatError(where + ": " + err.what());
    }
    return e;
}

}  // namespace

std::string_view to_string(DType t) { return info(t).name; }
std::size_t size_of(DType t) { return info(t).size; }

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& d : kDTypes)
        if (d.name == name) return d.type;
    return std::nullopt;
}

std::int64_t Tensor::numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
}

Tensor make_f32(std::string name, std::vector<std::int64_t> shape, std::span<const float> values) {
    Tensor t{std::move(name), DType::F32, std::move(shape), {}};
    const auto bytes = byte_count(t.shape, sizeof(float));
    if (!bytes || *bytes != values.size_bytes())
        throw FormatError("tensor " + in_quotes(t.name) + ": shape " + shape_string(t.shape) + " does not hold " +
                          std::to_string(values.size()) + " values");
    t.data.resize(values.size_bytes());
    if (!values.empty()) std::memcpy(t.data.data(), values.data(), values.size_bytes());
    return t;
}

const Tensor* File::find(std::string_view name) const {
    for (const auto& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string serialize(const File& f) {
    // Check everything before writing anything.
    std::set<std::string_view> names;
    for (const auto& t : f.tensors) {
        const std::string where = f.source + ": tensor " + in_quotes(t.name);
        if (t.name == "__metadata__") throw FormatError(where + ": the name is reserved for the metadata");
        if (!names.insert(t.name).second) throw FormatError(where + ": two tensors have this name");
        const auto bytes = byte_count(t.shape, size_of(t.dtype));
        if (!bytes) throw FormatError(where + ": shape " + shape_string(t.shape) + " is negative or too large");
        if (*bytes != t.data.size())
            throw FormatError(where + ": holds " + std::to_string(t.data.size()) + " bytes, but shape " +
                              shape_string(t.shape) + " of " + std::string(to_string(t.dtype)) + " needs " +
                              std::to_string(*bytes));
    }
    // Largest element first, then by name: every tensor then starts at a
    // multiple of its element size (the data region starts 8-aligned).
    std::vector<const Tensor*> order;
    for (const auto& t : f.tensors) order.push_back(&t);
    std::stable_sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
        if (size_of(a->dtype) != size_of(b->dtype)) return size_of(a->dtype) > size_of(b->dtype);
        return a->name < b->name;
    });

    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!f.metadata.empty()) header["__metadata__"] = f.metadata;
    std::uint64_t offset = 0;
    for (const Tensor* t : order) {
        header[t->name] = {{"dtype", std::string(to_string(t->dtype))},
                           {"shape", t->shape},
                           {"data_offsets", {offset, offset + t->data.size()}}};
        offset += t->data.size();
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // JSON allows trailing whitespace

    std::string out;
    out.reserve(8 + text.size() + offset);
    append_le_u64(out, text.size());
    out += text;
    for (const Tensor* t : order) out.append(reinterpret_cast<const char*>(t->data.data()), t->data.size());
    return out;
}

File parse(std::string_view bytes, const std::string& source) {
    if (bytes.size() < 8)
        throw FormatError(source + ": the file is " + std::to_string(bytes.size()) +
                          " bytes long, shorter than the 8-byte header length");
    const std::uint64_t n = read_le_u64(bytes.data());
    if (n > kMaxHeaderBytes)
        throw FormatError(source + ": header length " + std::to_string(n) + " is over the limit of " +
                          std::to_string(kMaxHeaderBytes) + " bytes");
    if (n > bytes.size() - 8)
        throw FormatError(source + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                          std::to_string(bytes.size()) + " bytes)");
    const std::string_view header_text = bytes.substr(8, n);
    const std::string_view data = bytes.substr(8 + n);
    const nlohmann::json header = parse_header(header_text, source);
    // The reference reader requires an object with no leading whitespace.
    if (header_text.front() != '{') throw FormatError(source + ": the header must start with '{', not whitespace");

    File f;
    f.source = source;
    std::vector<Entry> entries;
    for (const auto& [key, value] : header.items()) {
        if (key == "__metadata__") {
            if (!value.is_object())
                throw FormatError(source + ": __metadata__ is " + kind_of(value) + ", not an object of strings");
            for (const auto& [k, v] : value.items()) {
                if (!v.is_string())
                    throw FormatError(source + ": __metadata__ " + in_quotes(k) + " is " + kind_of(v) + ", not a string");
                f.metadata[k] = v.get<std::string>();
            }
            continue;
        }
        Entry e = parse_entry(key, value, source);
        const std::string where = source + ": tensor " + in_quotes(key);
        const std::string range = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
        if (e.end < e.begin) throw FormatError(where + ": " + range + " end before they begin");
        if (e.end > data.size())
            throw FormatError(where + ": " + range + " run past the end of the data (" + std::to_string(data.size()) +
                              " bytes after the header)");
        const auto need = byte_count(e.tensor.shape, size_of(e.tensor.dtype));
        if (!need || *need != e.end - e.begin)
            throw FormatError(where + ": " + range + " hold " + std::to_string(e.end - e.begin) + " bytes, but shape " +
                              shape_string(e.tensor.shape) + " of " + std::string(to_string(e.tensor.dtype)) +
                              " needs " + (need ? std::to_string(*need) : "more than 2^64"));
        entries.push_back(std::move(e));
    }

    // The tensors must tile the data region: sorted by offset, each begins
    // where the previous one ended, the first at 0, the last at the end.
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
    std::uint64_t at = 0;
    const Entry* prev = nullptr;
    for (const Entry& e : entries) {
        if (e.begin < at)
            throw FormatError(source + ": tensors " + in_quotes(prev->tensor.name) + " [" + std::to_string(prev->begin) +
                              ", " + std::to_string(prev->end) + ") and " + in_quotes(e.tensor.name) + " [" +
                              std::to_string(e.begin) + ", " + std::to_string(e.end) + ") overlap");
        if (e.begin > at)
            throw FormatError(source + ": data bytes [" + std::to_string(at) + ", " + std::to_string(e.begin) +
                              ") belong to no tensor (gap before tensor " + in_quotes(e.tensor.name) + ")");
        at = e.end;
        prev = &e;
    }
    if (at != data.size())
        throw FormatError(source + ": data bytes [" + std::to_string(at) + ", " + std::to_string(data.size()) +
                          ") at the end of the file belong to no tensor");

    for (Entry& e : entries) {
        const auto* p = reinterpret_cast<const std::byte*>(data.data()) + e.begin;
        e.tensor.data.assign(p, p + (e.end - e.begin));
        f.tensors.push_back(std::move(e.tensor));
    }
    return f;
}

void save(const std::filesystem::path& path, const File& f) {
    File named = f;  // messages name the destination
    named.source = path.string();
    write_file_atomic(path, serialize(named));
}

File load(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    const std::string source = path.string();
    std::error_code ec;
    if (!fs::exists(path, ec)) throw FormatError(source + ": no such file");
    if (!fs::is_regular_file(path, ec)) throw FormatError(source + ": not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw FormatError(source + ": cannot open for reading");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw FormatError(source + ": read error");
    return parse(bytes, source);
}

const Tensor& expect(const File& f, const std::string& name, DType dtype, const std::vector<std::int64_t>& shape) {
    const Tensor* t = f.find(name);
    if (!t) {
        std::string have;
        std::size_t listed = 0;
        for (const auto& other : f.tensors) {
            if (listed++ == 8) {
                have += ", ...";
                break;
            }
            have += (have.empty() ? "" : ", ") + other.name;
        }
        throw FormatError(f.source + ": no tensor " + in_quotes(name) + " (the file has " +
                          std::to_string(f.tensors.size()) + (f.tensors.empty() ? " tensors)" : ": " + have + ")"));
    }
    if (t->dtype != dtype)
        throw FormatError(f.source + ": tensor " + in_quotes(name) + " is " + std::string(to_string(t->dtype)) +
                          ", expected " + std::string(to_string(dtype)));
    if (t->shape != shape)
        throw FormatError(f.source + ": tensor " + in_quotes(name) + " has shape " + shape_string(t->shape) +
                          ", expected " + shape_string(shape));
    return *t;
}

std::span<const float> expect_f32(const File& f, const std::string& name, const std::vector<std::int64_t>& shape) {
    const Tensor& t = expect(f, name, DType::F32, shape);
    return {reinterpret_cast<const float*>(t.data.data()), t.data.size() / sizeof(float)};
}

}  // namespace mw::st
