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

}  // namespace mw
