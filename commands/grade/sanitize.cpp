#include "commands/grade/sanitize.hpp"

#include <cstdio>
#include <cstring>

namespace mw::grade {

namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 (Unicode 15, table 3-7).
std::size_t sequence_length(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char c = b(0);
    if (c < 0x80) return 1;
    std::size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (b(k) < 0x80 || b(k) > 0xBF) return 0;
    return n;
}

}  // namespace

std::string valid_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = sequence_length(s, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";  // U+FFFD
            ++i;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return out;
}

namespace {

// The bidirectional control that starts at text[i] (well-formed UTF-8), or 0.
unsigned bidi_control(const std::string& text, std::size_t i) {
    auto at = [&](std::size_t j) { return j < text.size() ? static_cast<unsigned char>(text[j]) : 0u; };
    if (at(i) == 0xD8 && at(i + 1) == 0x9C) return 0x061C;  // arabic letter mark
    if (at(i) != 0xE2) return 0;
    const unsigned cp = 0x2000 | ((at(i + 1) & 0x3Fu) << 6) | (at(i + 2) & 0x3Fu);
    if (at(i + 1) < 0x80 || at(i + 1) > 0x81) return 0;
    const bool bidi = cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
    return bidi ? cp : 0;
}

}  // namespace

std::string printable(std::string_view s) {
    const std::string text = valid_utf8(s);
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        // C1 controls are U+0080..U+009F, encoded C2 80..C2 9F.
        const bool c1 = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
        if (const unsigned bidi = bidi_control(text, i)) {
            char esc[12];
            std::snprintf(esc, sizeof esc, "\\u{%04X}", bidi);
            out += esc;
            i += bidi == 0x061C ? 1 : 2;
        } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F || c1) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\x%02X", c1 ? static_cast<unsigned char>(text[++i]) : c);
            out += esc;
        } else {
            out += text[i];
        }
    }
    return out;
}

nlohmann::json printable_strings(const nlohmann::json& doc) {
    if (doc.is_string()) return printable(doc.get_ref<const std::string&>());
    if (doc.is_array()) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& e : doc) out.push_back(printable_strings(e));
        return out;
    }
    if (doc.is_object()) {
        nlohmann::json out = nlohmann::json::object();
        for (auto it = doc.begin(); it != doc.end(); ++it) out[printable(it.key())] = printable_strings(it.value());
        return out;
    }
    return doc;
}

std::string bounded(const char* field, std::size_t n) { return std::string(field, strnlen(field, n)); }

}  // namespace mw::grade
