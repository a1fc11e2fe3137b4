// The layout lever: the same arithmetic on the same values, stored in a
// different order. Every pair below does identical FLOPs in the identical
// order (the CPU pairs produce bit-identical results); only the addresses
// differ, and with them the bytes the memory system has to move.
//
// Ops and their ladders (CPU | CUDA):
//
//   matmul_bt  C[M,N] = A[M,K] B[K,N], B given transposed as Bt[N,K] (the way
//              nn.Linear stores its weight), fp32
//     reference/layout/matmul_bt.cpp         0 strided: B(k,j) = Bt[j*K+k] read in place, one float per line
//     optimized/layout/matmul_bt_copy.cpp    1 copy: transpose Bt to B first (timed), then the unit-stride loop
//     optimized/layout/matmul_bt_packed.cpp  2 packed: Bt repacked into K x 64 column panels that stay in L2
//   permute    O = P · permute(V, 0,2,1,3): attention's P·V for Q query rows,
//              V produced as [B,S,H,D], consumed per head as [S,D], fp32
//     reference/layout/permute.cpp           0 strided: each head's [S,D] slice read in place, rows H*D floats apart
//     optimized/layout/permute_copy.cpp      1 copy: V made contiguous as [B,H,S,D] first (timed), same consumer
//   aos_soa    scaled[t] = logit[t] / temperature[t] over per-token sampler records
//     reference/layout/aos_soa.cpp           0 aos: 64-byte records, the pass drags whole records through memory
//     optimized/layout/soa.cpp               1 soa: one array per field, the pass reads only the two it needs
//   transpose  out[C,R] = in[R,C]^T, fp32
//     reference/layout/transpose.cpp         0 naive: read rows, write columns (one line per stored float)
//     optimized/layout/transpose_blocked.cpp 1 blocked: 32x32 tiles staged in a small buffer, lines used whole
//     reference/layout/transpose.cu          0 naive: coalesced reads, writes 32 sectors per warp
//     optimized/layout/transpose_smem_tiles.cu   1 32x32 shared-memory tile: both sides coalesced
//     optimized/layout/transpose_smem_padded.cu  2 tile rows padded to 33 floats: no bank conflicts
//
// Run: memwall run layout --backend cpu --threads 2   (cuda, or cuda-emu without a GPU)
//
// How bytes are counted in this lever. Layout changes no compulsory byte, so
// each variant declares the traffic it really causes at the boundary where
// the layout decides the outcome: on the CPU, 64-byte lines moved between a
// core's private caches (L1 48 KiB + L2 2 MiB on the reference Xeon) and the
// shared L3 / DRAM; on the GPU, 32-byte sectors moved between the SMs and L2.
// A strided access that is not reused before its line is evicted costs the
// whole line; a contiguous one costs 4 bytes per float. A store counts its
// line once (the write-back); the read-for-ownership that precedes a store to
// an uncached line is real but left out everywhere, as in the other levers,
// so ratios between rungs stay comparable.
//
// Why the strided lines are evicted before reuse at the default shapes: the
// strides are multiples of 4 KiB (K = 1024 floats, H*D = 2048 floats, R =
// 8192 floats). L1 is indexed by address bits 6-11 and L2 by bits 6-16, so
// lines at the same offset within their 4 KiB pages all compete for one of
// L1's 64 sets (12 lines in all) and for 1/64 of L2's sets (bits 12-16 come
// from the physical page, so 32 of 2048 sets: 512 lines, 32 KiB). A sweep of
// a thousand such lines cannot stay in either. At strides that are not a
// multiple of 4 KiB the same loops run faster because L2 catches part of the
// reuse; the byte models below then overstate the naive rungs' traffic.
#pragma once

#include <cstdint>

#include "harness/registry.hpp"

namespace mw::layout {

// c[0:n] += a * b[0:n]: the inner loop of every contiguous matmul rung (and
// of the permute consumer). restrict: an output row never overlaps an input,
// so GCC vectorizes it with the baseline ISA (SSE2: separate mul and add, no
// FMA contraction, hence the same rounding as the scalar strided loops).
inline void axpy_row(float* __restrict c, const float* __restrict b, float a, long n) {
    for (long j = 0; j < n; ++j) c[j] += a * b[j];
}

// out[C,R] = in[R,C]^T with 32x32 tiles staged through a small buffer
// (optimized/layout/transpose_blocked.cpp); also the copy step of
// matmul_bt's copy rung. OpenMP over tiles.
void transpose_tiled(const float* in, float* out, long rows, long cols);
inline constexpr int kTransposeTile = 32;

// The permute op's consumer, for one (batch, head): o[q,:] = sum_s p[q,s] v[s,:]
// for q < Q, with rows of v `ldv` floats apart (H*D through the permuted view,
// D when contiguous). Same loop for both rungs (reference/layout/permute.cpp).
void pv_head(const float* p, const float* v, long ldv, float* o, long S, long D, long Q);

// One token's sampler state: 16 four-byte fields, one 64-byte cache line.
// The aos_soa op stores T of these back to back; its pass reads two fields.
struct TokenRecord {
    std::int32_t token_id, position, sequence_id, parent_beam;
    float logit, temperature, top_p, min_p;
    float logprob, cumulative_logprob, presence_penalty, frequency_penalty;
    float repetition_penalty;
    std::int32_t top_k;
    std::uint32_t flags, rng_state;
};
static_assert(sizeof(TokenRecord) == 64, "a token record is one 64-byte cache line");

}  // namespace mw::layout
