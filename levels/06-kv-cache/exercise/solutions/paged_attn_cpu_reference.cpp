// Reference solution of exercise paged-attn-cpu, used by tests/grade: the
// project's own blocks rung (optimized/kv_cache/paged_attn_blocks.cpp) and
// the chunk step it calls (kernels/kv_cache/attend.cpp), linked from the
// grader's worker library, run over the student's arrays the way the rung's timed call
// runs over the harness's. Graded against the blocks variant it *is*, it
// must get full marks; if it doesn't, the grader's timing is unfair.
#include "reference/kv_cache/paged_attn.hpp"

extern "C" void student_paged_attn(const float* q, const std::int32_t* block_table, const std::int32_t* lens,
                                   const void* K, const void* V, const float* K_scale, const float* V_scale,
                                   float* o, int b, int heads, int kv_heads, int hd, int max_blocks, int int8) {
    mw::kv_cache::PagedArgs a;
    a.q = q, a.table = block_table, a.lens = lens, a.o = o;
    a.b = b, a.heads = heads, a.kv_heads = kv_heads, a.hd = hd, a.max_blocks = max_blocks, a.int8 = int8 != 0;
    if (a.int8) {
        a.kq = static_cast<const std::int8_t*>(K), a.vq = static_cast<const std::int8_t*>(V);
        a.ks = K_scale, a.vs = V_scale;
    } else {
        a.kf = static_cast<const float*>(K), a.vf = static_cast<const float*>(V);
    }
    mw::kv_cache::paged_attn_blocks(a);
}
