// Small string helpers the commands share (error messages, reports).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace mw {

// "a, b, c" (or with another separator); "" for an empty list.
inline std::string join(const std::vector<std::string>& v, std::string_view sep = ", ") {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) s += sep;
        s += v[i];
    }
    return s;
}

// printf's formatting as a string, of any length: fmt("%.2f", x),
// fmt("%dm%02ds", m, s). The compiler checks the arguments against the format.
[[gnu::format(printf, 1, 2)]] inline std::string fmt(const char* printf_format, ...) {
    std::va_list args, again;
    va_start(args, printf_format);
    va_copy(again, args);
    char buf[128];
    const int n = std::vsnprintf(buf, sizeof buf, printf_format, args);
    va_end(args);
    std::string s;
    if (n > 0 && std::size_t(n) < sizeof buf) {
        s.assign(buf, std::size_t(n));
    } else if (n > 0) {
        s.resize(std::size_t(n));
        std::vsnprintf(s.data(), s.size() + 1, printf_format, again);
    }
    va_end(again);
    return s;
}

// A time in seconds, three digits in s, ms or µs: "1.23 s", "45.6 ms", "789 µs".
inline std::string time_str(double s) {
    if (s >= 1) return fmt("%.3g", s) + " s";
    if (s >= 1e-3) return fmt("%.3g", s * 1e3) + " ms";
    return fmt("%.3g", s * 1e6) + " µs";
}

// A size in bytes, three digits in binary units: "512 B", "1.5 KiB", "2.25 GiB".
inline std::string bytes_str(double b) {
    if (b >= 1024.0 * 1024 * 1024) return fmt("%.3g", b / (1024.0 * 1024 * 1024)) + " GiB";
    if (b >= 1024.0 * 1024) return fmt("%.3g", b / (1024.0 * 1024)) + " MiB";
    if (b >= 1024) return fmt("%.3g", b / 1024) + " KiB";
    return fmt("%.3g", b) + " B";
}

// v to `digits` significant digits, printf's %g: "0.0123", "372", "4.19e+09".
inline std::string fmt(double v, int digits = 3) { return fmt("%.*g", digits, v); }

// Text for HTML: & < > " as entities (element content and quoted attributes).
inline std::string html_escape(std::string_view s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    return o;
}

}  // namespace mw
