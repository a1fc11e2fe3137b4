// Copy detection (commands/course/fingerprint.hpp): what a renamed,
// reformatted or reordered copy keeps, what independent solutions of the same
// exercise do not share, and the winnowing guarantee.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "commands/course/fingerprint.hpp"

namespace fs = std::filesystem;
using namespace mw::course;

namespace {

const fs::path kSource = MEMWALL_SOURCE_DIR;
const fs::path kCopies = kSource / "tests/course/copies";

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_TRUE(in.good() || in.eof()) << p;
    return ss.str();
}

Document doc(const fs::path& p) { return Document::of(p.filename().string(), read(p)); }

std::vector<std::uint64_t> hashes(std::string_view s) {
    std::vector<std::uint64_t> h;
    for (const Token& t : tokenize(s)) h.push_back(t.hash);
    return h;
}

// The stub every student of level 01 starts from: its fingerprints are no one's.
const Base& stub01() {
    static const Base b = base_of({doc(kSource / "levels/01-vectorization/exercise/gemm_cpu.cpp")});
    return b;
}

// Every file of the project that solves level 01's CPU exercise: its rungs,
// their shared kernels and the instructor's solution.
std::vector<fs::path> project_gemm_sources() {
    std::vector<fs::path> out;
    for (const char* dir : {"optimized/vectorization", "kernels/vectorization", "reference/vectorization",
                            "levels/01-vectorization/exercise/solutions"})
        for (auto& e : fs::directory_iterator(kSource / dir))
            if (e.path().extension() != ".txt") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST(Fingerprint, NamesCommentsAndLayoutDoNotChangeTheTokens) {
    const std::string a = "int sum(const float* x, int n) { float s = 0; for (int i = 0; i < n; ++i) s += x[i]; return s; }";
    const std::string b = "// total\nint total(const float *values,\n          int count)\n{\n    float acc = 0;   /* running */\n"
                          "    for (int k = 0; k < count; ++k)\n        acc += values[k];\n    return acc;\n}\n";
    EXPECT_EQ(hashes(a), hashes(b));
    // Literals are one token each whatever their value or spelling.
    EXPECT_EQ(hashes("x = 1.5e-3f; y = \"a \\\" b\"; z = 'q';"), hashes("x = 7; y = \"\"; z = '\\n';"));
    // Which headers a file includes is not its code: include blocks of
    // unrelated files would otherwise match token for token.
    EXPECT_EQ(hashes("#include <vector>\n#  include \"x/y.hpp\"\nint x;"), hashes("int y;"));
    EXPECT_NE(hashes("#pragma omp parallel for\nint x;"), hashes("int y;"));
    const auto lines = tokenize(b);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.front().line, 2);  // "int", after the comment line
    EXPECT_EQ(lines.back().line, 9);   // "}"
}

TEST(Fingerprint, StructureDoesChangeTheTokens) {
    EXPECT_NE(hashes("a = b + c;"), hashes("a = b - c;"));
    EXPECT_NE(hashes("a = b + c;"), hashes("a = b + 1;"));     // a name is not a number
    EXPECT_NE(hashes("for (;;) x;"), hashes("while (;;) x;"));  // keywords are themselves
    EXPECT_NE(hashes("a <<= b;"), hashes("a < <= b;"));         // maximal munch
    EXPECT_EQ(hashes("a<<=b;").size(), 4u);
}

TEST(Fingerprint, AnyBytesTokenizeWithoutFault) {
    const std::string hostile[] = {std::string("/* never closed"), std::string("\"never closed\nx"),
                                   std::string("R\"abc(raw never closed"), std::string("R\"x(a)x\" y"),
                                   std::string("a\0b\xff\xfe c", 8), std::string(1000, '\\'), std::string("'"),
                                   std::string("1e+"), std::string(".5.5.5")};
    for (const std::string& s : hostile) {
        const auto t = tokenize(s);
        for (const Token& k : t) EXPECT_GE(k.line, 1);
        winnow(t);
    }
    EXPECT_EQ(tokenize("R\"x(a \" b)x\" y").size(), 2u);  // the raw string, then y
    EXPECT_TRUE(winnow(tokenize("int x;")).empty());       // shorter than one k-gram
}

TEST(Fingerprint, EveryRunOfKPlusWMinusOneSharedTokensIsFound) {
    // Random token streams that share one run at different places: a run of
    // k + w - 1 tokens always yields a common fingerprint (the winnowing
    // guarantee); streams that share nothing longer than k - 1 tokens have none.
    const Winnow p;
    std::mt19937_64 rng(7);
    auto stream = [&](int n) {
        std::vector<Token> t(n);
        for (auto& x : t) x = {rng() % 50, 1};  // a small alphabet, like real code
        return t;
    };
    auto shared = [](const std::vector<Fingerprint>& a, const std::vector<Fingerprint>& b) {
        int n = 0;
        for (auto& x : a)
            for (auto& y : b) n += x.hash == y.hash;
        return n;
    };
    for (int trial = 0; trial < 200; ++trial) {
        const int run = trial % 2 ? p.k + p.w - 1 : p.k - 1;
        auto a = stream(400), b = stream(300);
        const auto planted = stream(run);
        const int at_a = static_cast<int>(rng() % (a.size() - run)), at_b = static_cast<int>(rng() % (b.size() - run));
        std::copy(planted.begin(), planted.end(), a.begin() + at_a);
        std::copy(planted.begin(), planted.end(), b.begin() + at_b);
        if (run >= p.k + p.w - 1)
            EXPECT_GE(shared(winnow(a, p), winnow(b, p)), 1) << "trial " << trial;
        else
            EXPECT_EQ(shared(winnow(a, p), winnow(b, p)), 0) << "trial " << trial;
    }
}

TEST(Fingerprint, FlagsACopyOfTheProjectsRungRenamedReorderedAndReformatted) {
    // tests/course/copies/copy_of_simd_rung.cpp: rung 3's AVX2 micro-kernel
    // (its step helper and prefetching k loop), packing and macro-kernel
    // with every name changed, the functions in another order, the comments
    // replaced and the braces moved. When the rung changes, this copy must
    // follow it (and the line ranges below with it).
    const Document copy = doc(kCopies / "copy_of_simd_rung.cpp");
    const Document rung = doc(kSource / "optimized/vectorization/gemm_simd.cpp");
    const Match m = compare(copy, rung, stub01());
    EXPECT_TRUE(is_copy(m)) << "shared " << m.shared << ", copy in rung " << m.a_in_b << ", rung in copy " << m.b_in_a;
    EXPECT_GE(m.a_in_b, 0.4);
    EXPECT_GE(m.shared, 60);
    // A matched region of several fingerprints joins the copy's kernel
    // (lines 26-71: step helper and k loop) to the rung's micro-kernels
    // (lines 52-135: the AVX-512 pair has the AVX2 pair's tokens but for the
    // intrinsics' names).
    bool kernel = false;
    for (const Region& r : m.regions)
        kernel |= r.prints >= 3 && r.b_first >= 52 && r.b_last <= 135 && r.a_first >= 26 && r.a_last <= 71;
    EXPECT_TRUE(kernel) << m.regions.size() << " regions";
}

TEST(Fingerprint, FlagsACopyOfAnotherStudent) {
    const Match m = compare(doc(kCopies / "copy_of_student_a.cpp"), doc(kCopies / "student_a.cpp"), stub01());
    EXPECT_TRUE(is_copy(m)) << "shared " << m.shared << ", score " << m.score();
    EXPECT_GE(m.score(), 0.8);
}

TEST(Fingerprint, IndependentSolutionsAreNotFlagged) {
    // Three students' own solutions, the stub and the instructor's solution:
    // none a copy of another or of any of the project's GEMM sources.
    std::vector<Document> mine;
    for (const char* f : {"student_a.cpp", "student_b.cpp", "student_c.cpp"}) mine.push_back(doc(kCopies / f));
    mine.push_back(doc(kSource / "levels/01-vectorization/exercise/gemm_cpu.cpp"));
    double top_score = 0;
    int top_shared = 0;
    for (std::size_t i = 0; i < mine.size(); ++i) {
        for (std::size_t j = i + 1; j < mine.size(); ++j) {
            const Match m = compare(mine[i], mine[j], stub01());
            top_score = std::max(top_score, m.score());
            top_shared = std::max(top_shared, m.shared);
            EXPECT_FALSE(is_copy(m)) << mine[i].name << " vs " << mine[j].name << ": score " << m.score();
            EXPECT_LT(m.score(), CopyRule{}.min_score / 2) << mine[i].name << " vs " << mine[j].name;
        }
        for (const fs::path& p : project_gemm_sources()) {
            const Match m = compare(mine[i], doc(p), stub01());
            top_score = std::max(top_score, m.score());
            top_shared = std::max(top_shared, m.shared);
            EXPECT_FALSE(is_copy(m)) << mine[i].name << " vs " << p.filename() << ": score " << m.score();
        }
    }
    std::cout << "independent solutions: highest score " << top_score << ", most shared fingerprints " << top_shared
              << "\n";
    // The planted copies are flagged against their origin only.
    const Document copy = doc(kCopies / "copy_of_simd_rung.cpp");
    for (const Document& d : mine) EXPECT_FALSE(is_copy(compare(copy, d, stub01()))) << d.name;
}
