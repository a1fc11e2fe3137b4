// How `memwall grade` calls a paged-attn-cpu submission: compiled together
// with the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the op's order (reference/kv_cache/
// paged_attn.hpp): inputs q, block_table, lens, K, V and, with int8 = 1,
// K_scale and V_scale; output o (already poisoned with NaN by the grader,
// which checks afterwards that the inputs are unchanged and times the call
// itself). The block table is [b][max_blocks], max_blocks = the blocks of
// 16 that the shape's longest sequence (ctx) would need.
#include <cstdint>

#include "commands/grade/grade_worker.hpp"

extern "C" void student_paged_attn(const float* q, const std::int32_t* block_table, const std::int32_t* lens,
                                   const void* K, const void* V, const float* K_scale, const float* V_scale,
                                   float* o, int b, int heads, int kv_heads, int hd, int max_blocks, int int8);

void mw_grade_call(mw::grade::Call& c) {
    const int int8 = c.axis("int8") != 0;
    student_paged_attn(c.in<float>(0), c.in<std::int32_t>(1), c.in<std::int32_t>(2), c.in<unsigned char>(3),
                       c.in<unsigned char>(4), int8 ? c.in<float>(5) : nullptr, int8 ? c.in<float>(6) : nullptr,
                       c.out<float>(0), c.axis("b"), c.axis("heads"), c.axis("kv_heads"), c.axis("hd"),
                       (c.axis("ctx") + 15) / 16, int8);
}
