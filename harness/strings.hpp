// Small string helpers the commands share (error messages, reports).
#pragma once

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

// One number through a printf format ("%.2f", "%.3g", ...), as a string.
inline std::string fmt(const char* printf_format, double v) {
    char buf[128];
    std::snprintf(buf, sizeof buf, printf_format, v);
    return buf;
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

}  // namespace mw
