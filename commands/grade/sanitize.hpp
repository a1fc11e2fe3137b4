// Bytes from a submission (its compiler's messages, its output, its
// exception messages) on their way into a report. Each place they go gets
// what it can hold: JSON text must be valid UTF-8; a terminal must not meet
// escape sequences, bells or carriage returns that rewrite what the grader
// printed; a fixed-size message field is read no further than its size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mw::grade {

// `s` with every byte sequence that is not well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included) replaced by U+FFFD.
std::string valid_utf8(std::string_view s);

// valid_utf8(s), then every control character except newline and tab (C0,
// DEL and C1, ESC, BEL and CR among them) written as a visible \xNN, and
// every bidirectional control (U+061C, U+200E/F, U+202A..E, U+2066..9: text
// that reads in another order than it is stored) as a visible \u{NNNN}.
std::string printable(std::string_view s);

// `doc` with printable() applied to every string in it, keys included: what
// the JSON and Gradescope reports are dumped from.
nlohmann::json printable_strings(const nlohmann::json& doc);

// A NUL-terminated message in a fixed array of `n` bytes that the other
// side may have filled to the end: read at most n bytes.
std::string bounded(const char* field, std::size_t n);

}  // namespace mw::grade
