// attn_decode on the GPU, KV-cache lever, CUDA rung 1: a paged cache read by
// a flash-decoding kernel. (The ladders are listed in reference/kv_cache/
// generate.hpp; the kernels are in kernels/kv_cache/paged_attention.cuh.)
//
// What changes from a contiguous cache: memory. A serving engine does not
// know how long a sequence will grow, so a contiguous [ctx_max] cache per
// sequence reserves the worst case; a paged cache hands out pages of 16
// positions from a shared pool as sequences grow, and each sequence keeps a
// block table of its pages (vLLM). The price is one table lookup per page —
// 4 bytes per 16 positions x kv_heads x hd x 8 bytes of cache, 1/4096 of the
// traffic at the default shape — and pages that need not be adjacent, which
// costs nothing to a kernel that reads whole rows anyway.
// prepare() deals the pool's pages to the sequences in a shuffled order (a
// free list after churn), so a kernel that ignored the table would read other
// sequences' rows, and fills them through kv_append, a prompt's worth of rows
// per launch, as a prefill would (untimed). The timed call is paged_decode.
// Expected: bandwidth-bound like the CPU split rung — bytes the cache once
// (8 b ctx kv_heads hd) plus the table and the partial results (written and
// read once, 8 b heads splits (hd + 2)) — so close to the GPU's DRAM
// bandwidth when b x kv_heads x ctx / 256 blocks fill the SMs.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "harness/cuda/device_problem.hpp"
#include "kernels/kv_cache/paged_attention.cuh"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {
namespace {

using mw::cuda::device_array;

template <class T> std::shared_ptr<T> upload(const std::vector<T>& host) {
    auto d = device_array<T>(host.size());
    MW_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// Every sequence's ctx rows, appended `chunk` positions per launch.
void prefill(const PagedKv& kv, const Problem& p) {
    const int b = int(p.shape["b"]), ctx = int(p.shape["ctx"]), row = kv.kv_heads * kv.hd;
    const int chunk = std::min(ctx, 256);
    std::vector<float> hk(std::size_t(b) * chunk * row), hv(hk.size());
    auto dk = device_array<float>(hk.size()), dv = device_array<float>(hk.size());
    auto start = device_array<std::int32_t>(std::size_t(b));
    for (int j0 = 0; j0 < ctx; j0 += chunk) {
        const int n = std::min(chunk, ctx - j0);
        for (int s = 0; s < b; ++s) {  // rows [b][n][kv_heads][hd], packed
            const std::size_t from = (std::size_t(s) * ctx + j0) * row, bytes = std::size_t(n) * row * sizeof(float);
            std::memcpy(hk.data() + std::size_t(s) * n * row, p.in("K").as<float>() + from, bytes);
            std::memcpy(hv.data() + std::size_t(s) * n * row, p.in("V").as<float>() + from, bytes);
        }
        const std::vector<std::int32_t> at(std::size_t(b), j0);
        MW_CUDA_CHECK(cudaMemcpy(start.get(), at.data(), at.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
        MW_CUDA_CHECK(cudaMemcpy(dk.get(), hk.data(), std::size_t(b) * n * row * sizeof(float), cudaMemcpyHostToDevice));
        MW_CUDA_CHECK(cudaMemcpy(dv.get(), hv.data(), std::size_t(b) * n * row * sizeof(float), cudaMemcpyHostToDevice));
        paged::kv_append(kv, start.get(), dk.get(), dv.get(), b, n);
        MW_CUDA_CHECK(cudaDeviceSynchronize());  // before the staging buffers are refilled
    }
}

Instance prepare_paged(Problem& p) {
    const int b = int(p.shape["b"]), h = int(p.shape["heads"]), g = int(p.shape["kv_heads"]);
    const int ctx = int(p.shape["ctx"]), hd = int(p.shape["hd"]);
    const int max_pages = (ctx + kPageSize - 1) / kPageSize;
    const std::size_t pool = std::size_t(b) * max_pages * kPageSize * g * hd;
    auto K = device_array<float>(pool), V = device_array<float>(pool);
    auto table = upload(shuffled_page_table(b, max_pages, p.seed));
    auto lens = upload(std::vector<std::int32_t>(std::size_t(b), ctx));
    const std::size_t ws_floats = paged_workspace_floats(b, h, hd, max_pages);
    auto ws = device_array<float>(ws_floats);
    const PagedKv kv{K.get(), V.get(), table.get(), lens.get(), max_pages, g, hd};
    prefill(kv, p);
    const std::size_t device_bytes = (2 * pool + ws_floats) * sizeof(float) + (std::size_t(b) * max_pages + b) * 4;
    return mw::cuda::device_instance(
        p,
        // K, V, table, lens, ws: captured to keep the device arrays alive.
        [kv, b, h, K, V, table, lens, ws](mw::cuda::DeviceProblem& d) {
            paged::paged_decode(kv, d.in<const float>("q"), d.out<float>("o"), b, h, ws.get(), d.stream);
        },
        device_bytes);
}

double paged_bytes(const Shape& s) {
    const double b = double(s["b"]), pages = std::ceil(double(s["ctx"]) / kPageSize);
    const double partials = 8.0 * b * double(s["heads"]) * paged_splits(int(pages)) * (double(s["hd"]) + 2);
    return attn_decode_cache_bytes(s) + 4.0 * b * pages + partials;
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(attn_decode_paged_cuda, {
    .name = "paged", .op = "attn_decode", .lever = "kv_cache",
    // The CUDA ladder's first (and so far only) rung: its reference on this backend.
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "the cache in 16-position pages from a shared pool through a block table; flash-decoding: "
                 "blocks of 16 pages read once per query group, partial softmaxes merged",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::paged_bytes(s); },
    .prepare = mw::kv_cache::prepare_paged,
    .accepts = [](const mw::Shape& s) -> std::string {
        return s["hd"] > mw::kv_cache::kPagedMaxHd
                   ? "hd > " + std::to_string(mw::kv_cache::kPagedMaxHd) + " (a lane holds hd / 32 floats of q and o)"
                   : "";
    } });
