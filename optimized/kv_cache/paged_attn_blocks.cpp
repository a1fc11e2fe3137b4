// paged_attn, rung 1: a block is a chunk of the online softmax.
//
// Change from rung 0: no gather and no scratch copy. Per (sequence, kv head)
// the G query heads of the group walk the sequence's block table together,
// and each block — 16 positions, the last one cut at the sequence's length —
// is one chunk of kernels/kv_cache/attend.hpp's step (the one every cache
// layout of the lever runs): its keys dotted with all G queries while they
// are in L1, the running max, sum and output rescaled once per block. The
// rows of one kv head sit kv_heads x hd values apart in the pool
// ([block][16][kv_heads][hd]): attend's row stride. Int8 pools are widened
// inside the step, a code times its row's scale.
// Expected: the cache is read once per group instead of G times, in one pass
// instead of three: G (4 at the default shape) times fewer bytes than rung 0,
// so up to ~G x faster where the cache comes from DRAM.
#include <cmath>
#include <vector>

#include "kernels/kv_cache/attend.hpp"
#include "reference/kv_cache/paged_attn.hpp"

namespace mw::kv_cache {

void paged_attn_blocks(const PagedArgs& a) {
    const int G = a.heads / a.kv_heads, hd = a.hd;
    const std::int64_t stride = std::int64_t(a.kv_heads) * hd;  // from one position's row to the next
    const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel
    {
        std::vector<float> q(std::size_t(G) * hd);
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int s = 0; s < a.b; ++s)
            for (int g = 0; g < a.kv_heads; ++g) {
                const std::int32_t* blocks = a.table + std::int64_t(s) * a.max_blocks;
                const std::int64_t first_head = std::int64_t(s) * a.heads + std::int64_t(g) * G;
                for (std::size_t i = 0; i < q.size(); ++i) q[i] = a.q[first_head * hd + std::int64_t(i)] * scale;
                float* o = a.o + first_head * hd;
                // Block c's rows of kv head g: block * 16 rows of the pool, then the head.
                auto at = [&](int c) { return std::int64_t(blocks[c]) * kAttnChunk * a.kv_heads + g; };
                if (a.int8)
                    attend_group(q.data(), G, hd, a.lens[s], I8Chunks([&](int c) {
                                     return I8Rows{a.kq + at(c) * hd, a.vq + at(c) * hd, a.ks + at(c), a.vs + at(c),
                                                   stride, a.kv_heads};
                                 }), o);
                else
                    attend_group(q.data(), G, hd, a.lens[s], F32Chunks([&](int c) {
                                     return F32Rows{a.kf + at(c) * hd, a.vf + at(c) * hd, stride};
                                 }), o);
            }
    }
}

}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(paged_attn_blocks_cpu, {
    .name = "blocks", .op = "paged_attn", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "each block of the table one chunk of the lever's online-softmax step, shared by the G query "
                 "heads of a kv head: the cache read once per group, in one pass",
    .needs = {"avx2"},
    .prepare = [](mw::Problem& p) {
        const mw::kv_cache::PagedArgs a = mw::kv_cache::paged_args(p);
        mw::Instance inst;
        inst.run = [a] { mw::kv_cache::paged_attn_blocks(a); };
        return inst;
    } });
