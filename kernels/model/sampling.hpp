// Choosing the next token from a decoder's logits (`memwall generate`, and
// the speculative-decoding lever's target and draft samplers):
//   temperature 0   greedy: the first largest logit;
//   temperature T   a draw from softmax(z / T) over the top-k logits (all
//                   when k = 0), made from a hash of (seed, draw index), so a
//                   run is reproducible and draws are independent of order.
#pragma once

#include <cstdint>
#include <vector>

namespace mw::model {

int sample_token(const float* z, int V, double temperature, int top_k, std::uint64_t seed, std::int64_t draw);

// The distribution sample_token draws from, in fp64 (the sampler's oracle):
// a one-hot at the first maximum for temperature 0.
std::vector<double> sampling_probs(const float* z, int V, double temperature, int top_k);

}  // namespace mw::model
