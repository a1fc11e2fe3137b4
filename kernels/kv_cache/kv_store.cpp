// The KV-cache layouts (kernels/kv_cache/kv_store.hpp).
#include "kernels/kv_cache/kv_store.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/kv_cache/attend.hpp"

namespace mw::kv_cache {

namespace {

std::string seq_name(int seq) { return "sequence " + std::to_string(seq); }

}  // namespace

double bytes_per_position(const KvGeometry& g, Elem e) {
    return e == Elem::f32 ? 2.0 * g.layers * g.kv_dim() * 4.0 : 2.0 * g.layers * (g.kv_dim() * 1.0 + g.kv_heads * 4.0);
}

double KvStore::used_bytes() const {
    double n = 0;
    for (int w : written_) n += w;
    return n * position_bytes();
}

void KvStore::truncate(int seq, int len) {
    if (!is_open(seq)) throw std::invalid_argument("truncate: " + seq_name(seq) + " is not open");
    if (len < 0 || len > capacity(seq))
        throw std::invalid_argument("truncate: " + seq_name(seq) + " to " + std::to_string(len) + " positions; valid: 0.." +
                                    std::to_string(capacity(seq)));
    int& w = written_[std::size_t(seq)];
    w = std::min(w, len);
}

int KvStore::written(int seq) const {
    if (seq < 0 || seq >= int(written_.size())) throw std::invalid_argument(seq_name(seq) + " outside the store");
    return written_[std::size_t(seq)];
}

void KvStore::note_write(int seq, int pos) {
    int& w = written_[std::size_t(seq)];
    w = std::max(w, pos + 1);
}

// --- contiguous -------------------------------------------------------------

ContiguousStore::ContiguousStore(KvGeometry g, int slots, int max_len, Elem e)
    : KvStore(g), e_(e), slots_(slots), max_len_(max_len) {
    if (slots < 1 || max_len < 1)
        throw std::invalid_argument("contiguous KV store of " + std::to_string(slots) + " slots x " +
                                    std::to_string(max_len) + " positions: both must be at least 1");
    open_.assign(std::size_t(slots), 0);
    written_.assign(std::size_t(slots), 0);
    const std::size_t rows = std::size_t(slots) * g.layers * max_len;
    if (e == Elem::f32) {
        kf_.assign(rows * g.kv_dim(), 0.0f);
        vf_.assign(rows * g.kv_dim(), 0.0f);
    } else {
        kq_.assign(rows * g.kv_dim(), 0);
        vq_.assign(rows * g.kv_dim(), 0);
        ks_.assign(rows * g.kv_heads, 0.0f);
        vs_.assign(rows * g.kv_heads, 0.0f);
    }
}

bool ContiguousStore::is_open(int seq) const { return seq >= 0 && seq < slots_ && open_[std::size_t(seq)]; }

bool ContiguousStore::open(int seq, int max_len) {
    if (seq < 0 || seq >= slots_)
        throw std::invalid_argument(seq_name(seq) + " outside the store's slots 0.." + std::to_string(slots_ - 1));
    if (open_[std::size_t(seq)]) throw std::invalid_argument(seq_name(seq) + " is already open");
    if (max_len < 1) throw std::invalid_argument(seq_name(seq) + ": max_len " + std::to_string(max_len) + " < 1");
    if (max_len > max_len_) return false;
    open_[std::size_t(seq)] = 1;
    written_[std::size_t(seq)] = 0;
    return true;
}

bool ContiguousStore::grow(int seq, int len) {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    return len <= max_len_;
}

void ContiguousStore::close(int seq) {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    open_[std::size_t(seq)] = 0;
    written_[std::size_t(seq)] = 0;
}

int ContiguousStore::capacity(int seq) const { return is_open(seq) ? max_len_ : 0; }

double ContiguousStore::budget_bytes() const { return double(slots_) * max_len_ * position_bytes(); }

double ContiguousStore::reserved_bytes() const {
    double n = 0;
    for (int o : open_) n += o;
    return n * max_len_ * position_bytes();
}

void ContiguousStore::check(int seq, int layer, int pos) const {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    if (layer < 0 || layer >= geometry().layers)
        throw std::out_of_range("layer " + std::to_string(layer) + " outside 0.." + std::to_string(geometry().layers - 1));
    if (pos < 0 || pos >= max_len_)
        throw std::out_of_range(seq_name(seq) + ": position " + std::to_string(pos) + " outside its slot of " +
                                std::to_string(max_len_));
}

std::int64_t ContiguousStore::row(int seq, int layer, int pos) const {
    return (std::int64_t(seq) * geometry().layers + layer) * max_len_ + pos;
}

void ContiguousStore::write(int seq, int layer, int pos, const float* k, const float* v) {
    check(seq, layer, pos);
    const auto& g = geometry();
    const std::int64_t r = row(seq, layer, pos), kvd = g.kv_dim();
    if (e_ == Elem::f32) {
        std::memcpy(kf_.data() + r * kvd, k, sizeof(float) * std::size_t(kvd));
        std::memcpy(vf_.data() + r * kvd, v, sizeof(float) * std::size_t(kvd));
    } else {
        for (int h = 0; h < g.kv_heads; ++h) {
            const std::int64_t at = r * kvd + std::int64_t(h) * g.head_dim;
            ks_[std::size_t(r * g.kv_heads + h)] = quantize_row_int8(k + h * g.head_dim, g.head_dim, kq_.data() + at);
            vs_[std::size_t(r * g.kv_heads + h)] = quantize_row_int8(v + h * g.head_dim, g.head_dim, vq_.data() + at);
        }
    }
    note_write(seq, pos);
}

void ContiguousStore::attend(int seq, int layer, int kv_head, int len, const float* q, int G, float* o) const {
    check(seq, layer, len - 1);
    const auto& g = geometry();
    const std::int64_t r0 = row(seq, layer, 0), kvd = g.kv_dim(), off = std::int64_t(kv_head) * g.head_dim;
    if (e_ == Elem::f32) {
        const float* K = kf_.data() + r0 * kvd + off;
        const float* V = vf_.data() + r0 * kvd + off;
        attend_group(q, G, g.head_dim, len, F32Chunks([=](int c) {
            const std::int64_t at = std::int64_t(c) * kAttnChunk * kvd;
            return F32Rows{K + at, V + at, kvd};
        }), o);
    } else {
        const std::int8_t* K = kq_.data() + r0 * kvd + off;
        const std::int8_t* V = vq_.data() + r0 * kvd + off;
        const float* ks = ks_.data() + r0 * g.kv_heads + kv_head;
        const float* vs = vs_.data() + r0 * g.kv_heads + kv_head;
        const std::int64_t sst = g.kv_heads;
        attend_group(q, G, g.head_dim, len, I8Chunks([=](int c) {
            const std::int64_t j = std::int64_t(c) * kAttnChunk;
            return I8Rows{K + j * kvd, V + j * kvd, ks + j * sst, vs + j * sst, kvd, sst};
        }), o);
    }
}

// --- paged ------------------------------------------------------------------

PagedStore::PagedStore(KvGeometry g, int max_seqs, int n_blocks, int block_size)
    : KvStore(g), alloc_(n_blocks, block_size) {
    if (max_seqs < 1) throw std::invalid_argument("paged KV store for " + std::to_string(max_seqs) + " sequences: need at least 1");
    if (block_size != kAttnChunk)
        throw std::invalid_argument("paged KV store: block size " + std::to_string(block_size) +
                                    " (this store's attention reads blocks of " + std::to_string(kAttnChunk) + ")");
    tables_.resize(std::size_t(max_seqs));
    max_len_.assign(std::size_t(max_seqs), 0);
    written_.assign(std::size_t(max_seqs), 0);
    pool_.assign(std::size_t(n_blocks) * 2 * g.layers * block_size * g.kv_dim(), 0.0f);
}

void PagedStore::check_seq(int seq) const {
    if (seq < 0 || seq >= int(tables_.size()))
        throw std::invalid_argument(seq_name(seq) + " outside the store's sequences 0.." + std::to_string(tables_.size() - 1));
}

bool PagedStore::is_open(int seq) const { return seq >= 0 && seq < int(tables_.size()) && max_len_[std::size_t(seq)] > 0; }

bool PagedStore::open(int seq, int max_len) {
    check_seq(seq);
    if (is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is already open");
    if (max_len < 1) throw std::invalid_argument(seq_name(seq) + ": max_len " + std::to_string(max_len) + " < 1");
    if (blocks_for(max_len, alloc_.block_size()) > alloc_.total()) return false;  // could never fit
    max_len_[std::size_t(seq)] = max_len;
    written_[std::size_t(seq)] = 0;
    return true;
}

bool PagedStore::open_shared(int seq, int max_len, int src, int prefix_len) {
    if (!is_open(src)) throw std::invalid_argument("shared prefix: source " + seq_name(src) + " is not open");
    if (prefix_len > written_[std::size_t(src)])
        throw std::invalid_argument("shared prefix of " + std::to_string(prefix_len) + " positions: " + seq_name(src) +
                                    " has written " + std::to_string(written_[std::size_t(src)]));
    if (prefix_len > max_len) throw std::invalid_argument("shared prefix longer than max_len");
    if (!open(seq, max_len)) return false;
    tables_[std::size_t(seq)] = share_prefix(alloc_, tables_[std::size_t(src)], prefix_len);
    written_[std::size_t(seq)] = prefix_len;
    return true;
}

bool PagedStore::grow(int seq, int len) {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    if (len > max_len_[std::size_t(seq)]) return false;
    return kv_cache::grow(alloc_, tables_[std::size_t(seq)], len);
}

void PagedStore::close(int seq) {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    release_all(alloc_, tables_[std::size_t(seq)]);
    max_len_[std::size_t(seq)] = 0;
    written_[std::size_t(seq)] = 0;
}

int PagedStore::capacity(int seq) const { return is_open(seq) ? tables_[std::size_t(seq)].len : 0; }

const BlockTable& PagedStore::table(int seq) const {
    check_seq(seq);
    return tables_[std::size_t(seq)];
}

double PagedStore::budget_bytes() const { return double(alloc_.total()) * alloc_.block_size() * position_bytes(); }
double PagedStore::reserved_bytes() const { return double(alloc_.used()) * alloc_.block_size() * position_bytes(); }

double PagedStore::wasted_bytes() const {
    // Rows of each block in use that some sequence has written (a shared
    // block: the most any of its sequences wrote into it).
    const int bs = alloc_.block_size();
    std::vector<int> filled(std::size_t(alloc_.total()), 0);
    for (std::size_t s = 0; s < tables_.size(); ++s)
        for (std::size_t i = 0; i < tables_[s].blocks.size(); ++i) {
            int& f = filled[std::size_t(tables_[s].blocks[i])];
            f = std::max(f, std::clamp(written_[s] - int(i) * bs, 0, bs));
        }
    double rows = 0;
    for (int f : filled) rows += f;
    return (double(alloc_.used()) * bs - rows) * position_bytes();
}

void PagedStore::truncate(int seq, int len) {
    KvStore::truncate(seq, len);
    auto& t = tables_[std::size_t(seq)];
    const int bs = alloc_.block_size(), keep = blocks_for(len, bs);
    while (int(t.blocks.size()) > keep) {
        alloc_.release(t.blocks.back());
        t.blocks.pop_back();
    }
    t.len = std::min(t.len, keep * bs);
}

float* PagedStore::block(int b) {
    const auto& g = geometry();
    return pool_.data() + std::size_t(b) * 2 * g.layers * alloc_.block_size() * g.kv_dim();
}
float* PagedStore::head_rows(int b, int layer, int kv_head) {
    const auto& g = geometry();
    return block(b) + (std::size_t(layer) * g.kv_heads + kv_head) * 2 * alloc_.block_size() * g.head_dim;
}
const float* PagedStore::head_rows(int b, int layer, int kv_head) const {
    return const_cast<PagedStore*>(this)->head_rows(b, layer, kv_head);
}

void PagedStore::write(int seq, int layer, int pos, const float* k, const float* v) {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    auto& t = tables_[std::size_t(seq)];
    if (pos < 0 || pos >= t.len)
        throw std::out_of_range(seq_name(seq) + ": position " + std::to_string(pos) + " outside its " +
                                std::to_string(t.len) + " allocated positions");
    const auto& g = geometry();
    const int bs = alloc_.block_size();
    const CowCopy cow = make_writable(alloc_, t, pos);
    if (cow.to == -2) throw std::runtime_error("paged KV store: no free block to copy shared block " + std::to_string(cow.from));
    if (cow.to >= 0)  // the whole block, every layer: other layers' rows of this block are still to be read
        std::memcpy(block(cow.to), block(cow.from), sizeof(float) * std::size_t(2) * g.layers * bs * g.kv_dim());
    const int b = t.blocks[std::size_t(pos / bs)], r = pos % bs, hd = g.head_dim;
    for (int h = 0; h < g.kv_heads; ++h) {
        float* K = head_rows(b, layer, h);
        std::memcpy(K + std::int64_t(r) * hd, k + h * hd, sizeof(float) * std::size_t(hd));
        std::memcpy(K + std::int64_t(bs + r) * hd, v + h * hd, sizeof(float) * std::size_t(hd));
    }
    note_write(seq, pos);
}

void PagedStore::attend(int seq, int layer, int kv_head, int len, const float* q, int G, float* o) const {
    if (!is_open(seq)) throw std::invalid_argument(seq_name(seq) + " is not open");
    const auto& t = tables_[std::size_t(seq)];
    if (len < 1 || len > t.len)
        throw std::out_of_range(seq_name(seq) + ": attention over " + std::to_string(len) + " positions, " +
                                std::to_string(t.len) + " allocated");
    const int hd = geometry().head_dim, bs = alloc_.block_size();
    attend_group(q, G, hd, len, F32Chunks([&, hd, bs](int c) {
        const float* K = head_rows(t.blocks[std::size_t(c)], layer, kv_head);
        return F32Rows{K, K + std::int64_t(bs) * hd, hd};
    }), o);
}

}  // namespace mw::kv_cache
