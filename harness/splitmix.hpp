// splitmix64's output function: a bijection of 64-bit words in which every
// input bit moves about half the output bits. The project hashes indices
// with it wherever a value must depend on (seed, index) alone, never on the
// order of draws: the seeded inputs (harness/inputs.cpp) and the
// speculative lever's uniforms (kernels/speculative/draw.cpp). Invertible,
// so never a secret's only guard (the grader keys its seeds with a PRF).
#pragma once

#include <cstdint>

namespace mw {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace mw
