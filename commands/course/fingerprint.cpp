#include "commands/course/fingerprint.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <unordered_map>

namespace mw::course {

namespace {

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull, kFnvPrime = 1099511628211ull;

std::uint64_t fnv(std::string_view s) {
    std::uint64_t h = kFnvOffset;
    for (unsigned char c : s) h = (h ^ c) * kFnvPrime;
    return h;
}

// Kept as themselves: a loop stays a loop and a type a type; every other
// name is "I". CUDA's qualifiers are keywords to its compiler.
bool is_keyword(std::string_view w) {
    static const std::unordered_set<std::string_view> kw = {
        "alignas", "alignof", "asm", "auto", "bool", "break", "case", "catch", "char", "char8_t", "char16_t",
        "char32_t", "class", "concept", "const", "consteval", "constexpr", "constinit", "const_cast", "continue",
        "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else",
        "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int",
        "long", "mutable", "namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public",
        "register", "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
        "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
        "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
        "wchar_t", "while", "__restrict__", "__restrict", "__global__", "__device__", "__host__", "__shared__",
        "__constant__", "__forceinline__", "__launch_bounds__", "__attribute__", "pragma", "include", "define"};
    return kw.count(w) > 0;
}

bool ident_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80; }
bool ident_char(unsigned char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digit(unsigned char c) { return c >= '0' && c <= '9'; }

// "#include ..." (or "# include"): a list of headers is the same five tokens
// a line whatever the headers, so two unrelated files' include blocks would
// match; they are left out.
bool is_include(std::string_view s, std::size_t i) {
    std::size_t j = i + 1;
    while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
    return s.compare(j, 7, "include") == 0;
}

// Longest first, so that maximal munch is a first match.
constexpr std::array<std::string_view, 25> kOperators = {
    "<<=", ">>=", "->*", "...", "<=>", "->", "::", "++", "--", "&&", "||", "<=", ">=", "==", "!=",
    "+=",  "-=",  "*=",  "/=",  "%=",  "&=", "|=", "^=", "<<", ">>"};

}  // namespace

std::vector<Token> tokenize(std::string_view s) {
    std::vector<Token> out;
    const std::uint64_t ident = fnv("I"), number = fnv("N"), string = fnv("S");
    int line = 1;
    std::size_t i = 0;
    const std::size_t n = s.size();
    auto skip_to = [&](std::size_t end) {  // advance, counting newlines
        end = std::min(end, n);
        for (; i < end; ++i) line += s[i] == '\n';
    };
    while (i < n) {
        const unsigned char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v' || c == '\\') {
            skip_to(i + 1);
        } else if (s.compare(i, 2, "//") == 0) {
            std::size_t end = s.find('\n', i);
            skip_to(end == std::string_view::npos ? n : end);
        } else if (s.compare(i, 2, "/*") == 0) {
            std::size_t end = s.find("*/", i + 2);
            skip_to(end == std::string_view::npos ? n : end + 2);
        } else if (c == '#' && is_include(s, i)) {  // which headers a file uses is not its code
            std::size_t end = s.find('\n', i);
            skip_to(end == std::string_view::npos ? n : end);
        } else if (c == 'R' && i + 1 < n && s[i + 1] == '"') {  // raw string R"delim( ... )delim"
            const int at = line;
            const std::size_t open = s.find('(', i + 2);
            if (open == std::string_view::npos || open - (i + 2) > 16) {
                skip_to(i + 1);
                out.push_back({ident, at});
                continue;
            }
            std::string close(1, ')');
            close.append(s.substr(i + 2, open - (i + 2)));
            close.push_back('"');
            const std::size_t end = s.find(close, open + 1);
            skip_to(end == std::string_view::npos ? n : end + close.size());
            out.push_back({string, at});
        } else if (c == '"' || c == '\'') {
            const int at = line;
            std::size_t j = i + 1;
            while (j < n && s[j] != c && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
            skip_to(j + 1);
            out.push_back({string, at});
        } else if (digit(c) || (c == '.' && i + 1 < n && digit(static_cast<unsigned char>(s[i + 1])))) {
            const int at = line;
            std::size_t j = i + 1;
            while (j < n) {
                const unsigned char d = s[j];
                const bool exponent_sign = (d == '+' || d == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E' ||
                                                                      s[j - 1] == 'p' || s[j - 1] == 'P');
                if (!(ident_char(d) || d == '.' || d == '\'' || exponent_sign)) break;
                ++j;
            }
            skip_to(j);
            out.push_back({number, at});
        } else if (ident_start(c)) {
            std::size_t j = i + 1;
            while (j < n && ident_char(static_cast<unsigned char>(s[j]))) ++j;
            const std::string_view word = s.substr(i, j - i);
            out.push_back({is_keyword(word) ? fnv(word) : ident, line});
            skip_to(j);
        } else {
            std::size_t len = 1;
            for (std::string_view op : kOperators)
                if (s.compare(i, op.size(), op) == 0) {
                    len = op.size();
                    break;
                }
            out.push_back({fnv(s.substr(i, len)), line});
            skip_to(i + len);
        }
    }
    return out;
}

std::vector<Fingerprint> winnow(const std::vector<Token>& tokens, Winnow p) {
    std::vector<Fingerprint> out;
    if (p.k < 1 || p.w < 1 || tokens.size() < static_cast<std::size_t>(p.k)) return out;
    const std::size_t grams = tokens.size() - p.k + 1;
    std::vector<std::uint64_t> h(grams);
    for (std::size_t i = 0; i < grams; ++i) {
        std::uint64_t x = kFnvOffset;
        for (int j = 0; j < p.k; ++j) x = (x ^ tokens[i + j].hash) * kFnvPrime;
        h[i] = x ^ (x >> 29);
    }
    // Of each window of w hashes, the smallest (the rightmost of equals),
    // recorded once for as long as it stays the window's minimum; a text
    // shorter than one window gives its minimum.
    std::deque<std::size_t> q;  // indices with increasing hashes
    std::size_t last = grams;
    for (std::size_t i = 0; i < grams; ++i) {
        while (!q.empty() && h[q.back()] >= h[i]) q.pop_back();
        q.push_back(i);
        if (q.front() + p.w <= i) q.pop_front();
        if (i + 1 >= static_cast<std::size_t>(p.w) || i + 1 == grams)
            if (q.front() != last) {
                last = q.front();
                out.push_back({h[last], static_cast<int>(last)});
            }
    }
    return out;
}

Document Document::of(std::string name, std::string_view source, Winnow p) {
    Document d{std::move(name), tokenize(source), {}};
    d.prints = winnow(d.tokens, p);
    return d;
}

Base base_of(const std::vector<Document>& bases) {
    Base b;
    for (const Document& d : bases)
        for (const Fingerprint& f : d.prints) b.insert(f.hash);
    return b;
}

Match compare(const Document& a, const Document& b, const Base& base, Winnow p) {
    auto first_of = [&](const Document& d) {
        std::unordered_map<std::uint64_t, int> m;
        for (const Fingerprint& f : d.prints)
            if (!base.count(f.hash)) m.emplace(f.hash, f.token);
        return m;
    };
    const auto in_a = first_of(a), in_b = first_of(b);
    Match m;
    m.a_prints = static_cast<int>(in_a.size());
    m.b_prints = static_cast<int>(in_b.size());
    std::vector<std::pair<int, int>> pairs;  // (token in a, token in b)
    for (const auto& [hash, at] : in_a)
        if (auto it = in_b.find(hash); it != in_b.end()) pairs.emplace_back(at, it->second);
    m.shared = static_cast<int>(pairs.size());
    if (m.a_prints) m.a_in_b = static_cast<double>(m.shared) / m.a_prints;
    if (m.b_prints) m.b_in_a = static_cast<double>(m.shared) / m.b_prints;
    std::sort(pairs.begin(), pairs.end());
    // A region grows while both files advance by at most a window's span.
    const int span = p.k + p.w;
    auto line_of = [](const Document& d, int token) { return d.tokens[std::min<std::size_t>(token, d.tokens.size() - 1)].line; };
    for (std::size_t i = 0; i < pairs.size();) {
        std::size_t j = i + 1;
        while (j < pairs.size() && pairs[j].first - pairs[j - 1].first <= span &&
               pairs[j].second > pairs[j - 1].second && pairs[j].second - pairs[j - 1].second <= span)
            ++j;
        int b_lo = pairs[i].second, b_hi = pairs[i].second;
        for (std::size_t t = i; t < j; ++t) b_lo = std::min(b_lo, pairs[t].second), b_hi = std::max(b_hi, pairs[t].second);
        m.regions.push_back({line_of(a, pairs[i].first), line_of(a, pairs[j - 1].first + p.k - 1), line_of(b, b_lo),
                             line_of(b, b_hi + p.k - 1), static_cast<int>(j - i)});
        i = j;
    }
    return m;
}

bool is_copy(const Match& m, CopyRule rule) { return m.shared >= rule.min_shared && m.score() >= rule.min_score; }

}  // namespace mw::course
