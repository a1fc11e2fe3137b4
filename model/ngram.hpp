// The baseline a byte-level language model must beat: an n-gram model of
// bytes with interpolated Witten-Bell smoothing (Chen & Goodman's survey,
// "An empirical study of smoothing techniques for language modeling"):
//
//   P_n(w | h) = (c(h w) + T(h) P_{n-1}(w | h')) / (c(h) + T(h))
//
// h the last n - 1 bytes, h' the last n - 2, c(.) counts in the training
// text, c(h) the bytes that followed h, T(h) how many distinct ones; a
// context never seen gives all of its weight to the shorter one, and
// P_0 is uniform over the 256 bytes. No parameter is tuned on the held-out
// text, so its cross-entropy there is an honest yardstick for the
// transformer's (`memwall train` records both).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mw::model {

class NgramModel {
public:
    // order 1..8 (contexts of up to 7 bytes); throws std::invalid_argument
    // for another order or an empty text.
    NgramModel(const std::string& text, int order);
    int order() const { return order_; }
    // P(w | the last order - 1 bytes of history[0, len)); fewer bytes of
    // history: the longest context there is.
    double prob(const unsigned char* history, std::size_t len, unsigned char w) const;
    // Mean -ln P(byte | the bytes before it in `text`), nats per byte.
    double cross_entropy(const std::string& text) const;

private:
    struct Table {  // one order: sorted keys (context << 8 | byte) with counts; contexts with c and T
        std::vector<std::uint64_t> keys;
        std::vector<std::uint32_t> counts;
        std::vector<std::uint64_t> contexts;
        std::vector<std::uint32_t> context_count, context_types;
    };
    int order_;
    std::vector<Table> tables_;  // tables_[n - 1]: contexts of n - 1 bytes
};

}  // namespace mw::model
