// Host entry points of the cuda-emu test kernels (tests/emu/*.cu). Each one
// copies its inputs to "device" memory, launches through mw::launch and
// copies the result back, exactly as a CUDA host wrapper would.
#pragma once

#include <cstdint>
#include <vector>

namespace emu_test {

// Warp-shuffle reduction: out[r] = sum of row r of x[rows][cols].
std::vector<float> row_sums(const std::vector<float>& x, int rows, int cols, int block_threads);

// Shared-memory tiled matmul C[M,N] = A[M,K] B[K,N] with 32x32 tiles (or 16x16).
// `missing` drops one barrier: 0 none, 1 the one after loading the tiles,
// 2 the one before the next tiles overwrite them.
std::vector<float> tiled_matmul(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K,
                                int tile, int missing = 0);

// Online softmax over each row of x[rows][cols], one block per row.
std::vector<float> online_softmax(const std::vector<float>& x, int rows, int cols, int block_threads);

// Reverses each block's chunk of x through dynamic shared memory.
std::vector<float> reverse_in_blocks(const std::vector<float>& x, int block_threads);

// Every thread of the grid adds 1 to an int counter and 0.5 to a float and a
// double: returns {int count, float sum, double sum}.
struct AtomicTotals { long long count; double fsum, dsum; unsigned max_seen; };
AtomicTotals count_atomically(unsigned blocks, unsigned threads);

// Each thread writes its global linear index at its (x,y,z) position.
std::vector<std::int64_t> index_3d(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz);

// Warp primitives: per thread {ballot, shfl width 8 idx, shfl_up 3, shfl_xor 5 width 16, syncthreads_count}.
std::vector<std::int64_t> warp_primitives(int threads);

// Stream capture (tests/emu/graph.cu): y += 1, then a host value copied in,
// then y *= it, captured on a stream and replayed twice (the host value 2,
// then 3); and the capture's refusals (the legacy stream, a synchronous
// copy, a launch on the legacy stream during a capture), and a capturing
// stream destroyed. y is n floats, zero at first.
struct GraphReplay {
    bool capturing_during = false, capturing_after = true;
    std::vector<float> after_capture, after_first, after_second;
    int legacy_begin = 0, sync_copy_in_capture = 0, end_after_sync_copy = 0;  // cudaError_t values
    bool broken_graph_null = false;
    bool legacy_launch_threw = false;
    int end_after_legacy_launch = 0, copy_after_destroyed_capture = -1;
};
GraphReplay graph_replay(int n);

// Faults: each launch throws mw::emu::LaunchError.
void divergent_barrier();       // half the block returns before __syncthreads
void barrier_in_branches();     // threads wait at two different __syncthreads
void shuffle_mask_excludes_caller();  // lanes 16..31 call with mask 0x0000ffff
void shuffle_reads_outside_mask();   // lane 15 of mask 0x0000ffff shuffles down from lane 16
void shuffle_masks_differ();    // lane 0 uses a mask the others don't
void shuffle_after_exit();      // full-mask shuffle after half the warp returned
void global_out_of_bounds();          // writes one past a cudaMalloc'd buffer (ASan only)
void dynamic_shared_out_of_bounds();  // reads one past smem_bytes (ASan only)
void reads_uninitialised_static_shared(std::vector<float>& out);  // no throw: NaN shows up

// Tensor-core wrappers (kernels/cuda/tensor_core.cuh), one warp (tensor_core.cu,
// also compiled by nvcc for the GPU: tests/tensor_core).
// mma_tile: D = A B + C for A [16][16], B [16][8] (16-bit bits: bf16, or f16
// with f16 = true), C [16][8]; each lane builds its fragments by the PTX
// layouts, or with wrong_fragment its A fragment's a[1] and a[2] swapped.
std::vector<float> mma_tile(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B,
                            const std::vector<float>& C, bool f16, bool wrong_fragment);
// ldmatrix .x n (1, 2, 4), .trans or not, of four 8 x 8 matrices M [4][8][8]
// held in shared memory with padded rows: out[lane * n + i] = lane's r[i].
std::vector<std::uint32_t> ldmatrix_lanes(const std::vector<std::uint16_t>& M, int n, bool trans);
// D = A B (bf16) with both fragments loaded by ldmatrix from row-major shared memory.
std::vector<float> mma_via_ldmatrix(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B);
// Two cp.async stages of in[256] (stage 1's last 16 bytes: only `tail_bytes`
// read): both stages after wait_group 1 (out[0, 256)), after wait_group 0
// (out[256, 512)).
std::vector<float> cp_async_stages(const std::vector<float>& in, int tail_bytes);
// D = A B + C, all [16][16] (A and B bf16 bits), through the warp matrix API
// (kernels/cuda/wmma.cuh); A's pointer `shift` elements past 256-bit alignment.
std::vector<float> wmma_tile(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B,
                             const std::vector<float>& C, int shift = 0);

}  // namespace emu_test
