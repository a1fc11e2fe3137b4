// One token's routing decision on the CPU, shared by moe_route's gemm rung
// and moe_layer's rungs (reference/moe/moe.hpp states the rule): from its E
// logits (bias included), the top k by insertion into a sorted list (a later
// expert moves ahead only when strictly larger, so equal logits stay in index
// order: the lower index first), and the softmax probabilities of the chosen
// ones renormalized to sum to 1. One pass over E for the top k, one for the
// softmax's max and sum.
#pragma once

#include <cstdint>

namespace mw::moe {

void route_token(const float* logits, int E, int k, std::int32_t* experts, float* weights);

}  // namespace mw::moe
