// The warp-level matrix API (nvcuda::wmma, <mma.h>) as the CUDA rungs use
// it, under one name, mw::wmma: compiled by nvcc, NVIDIA's own; under
// cuda-emu, an emulation of the subset the rungs use (16x16x16 tiles, bf16
// or f16 inputs, fp32 accumulator; fill, load, mma and store, row-major).
//
// NVIDIA leaves the mapping of a fragment's elements to the warp's lanes
// unspecified (code may only apply the same operation to every x[i]), so
// the emulation keeps the whole tile in every lane (num_elements = 256):
// element-wise code stays correct, and what the emulation checks is what the
// API requires of a caller: every lane of the warp calls each function
// together (converged), with the same pointer, which is 256-bit aligned,
// and a leading dimension that is a multiple of 16 bytes. A caller that
// breaks one gets a LaunchError naming it, where a GPU gives undefined
// results. The products of 16-bit inputs are exact in fp32; the emulation
// sums each tile's 16 in double and rounds once (a GPU's order differs by
// a few units in the last place).
#pragma once

#if !MEMWALL_EMU

#include <mma.h>

namespace mw {
namespace wmma = nvcuda::wmma;
}

#else

#include <cstdint>
#include <string>

#include "harness/cuda/launch.hpp"

namespace mw::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
enum layout_t { mem_row_major };

namespace detail {
constexpr int kTile = 16;

// The API's requirements of a collective call, checked under emulation.
inline void converged(const char* what) {
    if (__activemask() != 0xffffffffu)
        throw ::mw::emu::LaunchError(std::string("wmma::") + what + ": every lane of the warp must call it together");
}
inline void collective(const char* what, const void* ptr, unsigned ldm, std::size_t element_bytes) {
    const unsigned full = 0xffffffffu;
    converged(what);
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    if (__shfl_sync(full, p, 0) != p)
        throw ::mw::emu::LaunchError(std::string("wmma::") + what + ": the lanes passed different pointers");
    if (p % 32 != 0)
        throw ::mw::emu::LaunchError(std::string("wmma::") + what + ": the pointer is not 256-bit aligned");
    if ((ldm * element_bytes) % 16 != 0)
        throw ::mw::emu::LaunchError(std::string("wmma::") + what + ": ldm is not a multiple of 16 bytes");
    __syncwarp();
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation has the 16x16x16 shape");
    static constexpr int num_elements = 256;
    T x[256];
};

template <class Use, int M, int N, int K, class T, class Layout>
__device__ inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, T v) {
    for (auto& e : f.x) e = v;
}

// A or B (row-major, ldm elements per row).
template <class Use, class T>
__device__ inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, row_major>& f, const T* p, unsigned ldm) {
    detail::collective("load_matrix_sync", p, ldm, sizeof(T));
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[std::size_t(r) * ldm + c];
    __syncwarp();
}

__device__ inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm,
                                        layout_t) {
    detail::collective("load_matrix_sync", p, ldm, sizeof(float));
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[std::size_t(r) * ldm + c];
    __syncwarp();
}

__device__ inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                                         layout_t) {
    detail::collective("store_matrix_sync", p, ldm, sizeof(float));
    if (threadIdx.x % 32 == 0)
        for (int r = 0; r < 16; ++r)
            for (int c = 0; c < 16; ++c) p[std::size_t(r) * ldm + c] = f.x[r * 16 + c];
    __syncwarp();
}

// D = A B + C; D may be C.
template <class T>
__device__ inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                                const fragment<matrix_a, 16, 16, 16, T, row_major>& a,
                                const fragment<matrix_b, 16, 16, 16, T, row_major>& b,
                                const fragment<accumulator, 16, 16, 16, float>& c) {
    detail::converged("mma_sync");
    float out[256];
    for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 16; ++n) {
            double acc = c.x[r * 16 + n];
            for (int k = 0; k < 16; ++k) acc += double(float(a.x[r * 16 + k])) * double(float(b.x[k * 16 + n]));
            out[r * 16 + n] = float(acc);
        }
    for (int i = 0; i < 256; ++i) d.x[i] = out[i];
    __syncwarp();
}

}  // namespace mw::wmma

#endif
