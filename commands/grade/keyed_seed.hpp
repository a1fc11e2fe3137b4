// The seed of each grading call, from the grade's key (the instructor's
// secret, or a practice seed): HMAC-SHA256(key, "what#i") (OpenSSL), its
// first 8 bytes read as a little-endian integer. A submission sees the
// inputs of its calls, and from an input it may work back to that call's
// seed (the input generators are not one-way); it learns nothing more: the
// key, and with it every other call's inputs, stay out of reach as long as
// HMAC does.
#pragma once

#include <cstdint>
#include <string_view>

namespace mw::grade {

std::uint64_t keyed_seed(std::string_view key, std::string_view message);

}  // namespace mw::grade
