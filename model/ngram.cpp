// The n-gram baseline (model/ngram.hpp): sorted arrays of (context, byte)
// keys per order, counted by runs; lookups by binary search.
#include "model/ngram.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mw::model {

namespace {

// The `n` bytes before position `end` of `s`, big-endian in one integer.
std::uint64_t context_key(const unsigned char* s, std::size_t end, int n) {
    std::uint64_t k = 0;
    for (int i = n; i > 0; --i) k = (k << 8) | s[end - std::size_t(i)];
    return k;
}

}  // namespace

NgramModel::NgramModel(const std::string& text, int order) : order_(order) {
    if (order < 1 || order > 8) throw std::invalid_argument("n-gram order " + std::to_string(order) + "; valid: 1..8");
    if (text.empty()) throw std::invalid_argument("n-gram model of an empty text");
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    for (int n = 1; n <= order; ++n) {
        Table t;
        const int ctx = n - 1;
        std::vector<std::uint64_t> all;
        all.reserve(text.size());
        for (std::size_t i = std::size_t(ctx); i < text.size(); ++i) all.push_back(context_key(s, i, ctx) << 8 | s[i]);
        std::sort(all.begin(), all.end());
        for (std::size_t i = 0; i < all.size();) {
            std::size_t j = i;
            while (j < all.size() && all[j] == all[i]) ++j;
            t.keys.push_back(all[i]);
            t.counts.push_back(std::uint32_t(j - i));
            const std::uint64_t h = all[i] >> 8;
            if (t.contexts.empty() || t.contexts.back() != h) {
                t.contexts.push_back(h);
                t.context_count.push_back(0);
                t.context_types.push_back(0);
            }
            t.context_count.back() += std::uint32_t(j - i);
            t.context_types.back() += 1;
            i = j;
        }
        tables_.push_back(std::move(t));
    }
}

double NgramModel::prob(const unsigned char* history, std::size_t len, unsigned char w) const {
    double p = 1.0 / 256;
    for (int n = 1; n <= order_ && std::size_t(n - 1) <= len; ++n) {
        const Table& t = tables_[std::size_t(n - 1)];
        const std::uint64_t h = context_key(history, len, n - 1);
        const auto c = std::lower_bound(t.contexts.begin(), t.contexts.end(), h);
        if (c == t.contexts.end() || *c != h) continue;  // unseen: all weight to the shorter context
        const std::size_t ci = std::size_t(c - t.contexts.begin());
        const double ch = t.context_count[ci], T = t.context_types[ci];
        const auto k = std::lower_bound(t.keys.begin(), t.keys.end(), h << 8 | w);
        const double chw = k != t.keys.end() && *k == (h << 8 | w) ? t.counts[std::size_t(k - t.keys.begin())] : 0.0;
        p = (chw + T * p) / (ch + T);
    }
    return p;
}

double NgramModel::cross_entropy(const std::string& text) const {
    if (text.empty()) throw std::invalid_argument("cross-entropy of an empty text");
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    double sum = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const std::size_t from = i >= std::size_t(order_ - 1) ? i - std::size_t(order_ - 1) : 0;
        sum -= std::log(prob(s + from, i - from, s[i]));
    }
    return sum / double(text.size());
}

}  // namespace mw::model
