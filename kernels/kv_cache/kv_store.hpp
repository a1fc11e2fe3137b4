// Where a decoder keeps its past keys and values: the KV-cache lever's
// storage layouts behind one interface, so the model's decoder
// (kernels/model/model_cpu.hpp), the decode_step rungs and the serving
// simulation run the same code over each of them.
//
//   ContiguousStore   a slot of max_len positions per sequence, reserved
//                     when the sequence is opened (static reservation)
//   ContiguousStore   with Elem::i8: the same slots, keys and values stored
//                     int8 with one fp32 scale per (position, kv head)
//   PagedStore        blocks of 16 positions from a shared pool
//                     (kernels/kv_cache/block_allocator.hpp), allocated as
//                     a sequence grows, returned when it ends, a common
//                     prompt prefix shared copy-on-write
//
// A sequence is a small integer id (a slot), open from open() to close().
// Positions are written (write) after their keys and values are computed
// and read back by attend(), which runs kernels/kv_cache/attend.hpp's chunk
// step over the layout's rows: every layout, the same arithmetic.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kv_cache/block_allocator.hpp"

namespace mw::kv_cache {

struct KvGeometry {
    int layers = 0, kv_heads = 0, head_dim = 0;
    int kv_dim() const { return kv_heads * head_dim; }
};

enum class Elem { f32, i8 };

// Bytes one position occupies in every layer: keys and values, plus the
// int8 layout's two fp32 scales per kv head.
double bytes_per_position(const KvGeometry& g, Elem e);

class KvStore {
public:
    explicit KvStore(KvGeometry g) : g_(g) {}
    virtual ~KvStore() = default;
    const KvGeometry& geometry() const { return g_; }
    virtual std::string name() const = 0;

    // Opens sequence `seq` expecting up to `max_len` positions. Contiguous:
    // reserves them all now; paged: reserves nothing yet. False (and nothing
    // changes) when the store cannot take it: out of slots or memory.
    // Throws std::invalid_argument for a bad id, an open id or max_len < 1.
    virtual bool open(int seq, int max_len) = 0;
    // Room for positions [0, len): paged allocates blocks. False (nothing
    // changes) when memory runs out or len exceeds the sequence's max_len.
    virtual bool grow(int seq, int len) = 0;
    // Ends the sequence; its memory returns to the store.
    virtual void close(int seq) = 0;
    virtual bool is_open(int seq) const = 0;
    // Positions seq has room for (its grown length).
    virtual int capacity(int seq) const = 0;
    // Rolls seq back to its first `len` positions: what was written at len
    // and after is forgotten (used_bytes stops counting it; paged returns
    // the blocks past the one holding position len - 1 to the pool), and
    // the next write there starts afresh. Speculative decoding's rollback of
    // rejected draft positions. Throws std::invalid_argument for a closed
    // sequence or len outside 0..capacity(seq).
    virtual void truncate(int seq, int len);
    // Positions written (the highest written + 1, or the truncated length).
    int written(int seq) const;

    // Keys and values (after RoPE) of position `pos` at `layer`, [kv_dim]
    // each. Throws std::out_of_range past capacity(seq).
    virtual void write(int seq, int layer, int pos, const float* k, const float* v) = 0;
    // o[G][hd] = attention of the G query heads q[G][hd] (pre-scaled by
    // 1/sqrt(hd)) of kv head `kv_head` over positions [0, len) at `layer`.
    virtual void attend(int seq, int layer, int kv_head, int len, const float* q, int G, float* o) const = 0;

    // Memory accounting, bytes: the store's budget, what open sequences hold
    // (reserved or allocated), and what the positions written so far need
    // (the rest of reserved_bytes is waste: reserved and never written, or
    // the unused tail of a block).
    virtual double budget_bytes() const = 0;
    virtual double reserved_bytes() const = 0;
    double used_bytes() const;
    // Reserved bytes that hold no written position: a slot's unwritten
    // tail, a block's unfilled rows. Counts memory, not sequences: a block
    // shared by several sequences is one block (so with sharing, used_bytes,
    // which counts each sequence's positions, can exceed reserved_bytes,
    // while this never goes below zero).
    virtual double wasted_bytes() const { return reserved_bytes() - used_bytes(); }

protected:
    // The highest position written + 1 per sequence (for used_bytes).
    std::vector<int> written_;
    void note_write(int seq, int pos);
    virtual double position_bytes() const = 0;

private:
    KvGeometry g_;
};

// What each layout below implements: KvStore's pure virtuals (documented there).
#define MW_KV_STORE_OVERRIDES                                                                               \
    bool open(int seq, int max_len) override;                                                              \
    bool grow(int seq, int len) override;                                                                  \
    void close(int seq) override;                                                                          \
    bool is_open(int seq) const override;                                                                  \
    int capacity(int seq) const override;                                                                  \
    void write(int seq, int layer, int pos, const float* k, const float* v) override;                      \
    void attend(int seq, int layer, int kv_head, int len, const float* q, int G, float* o) const override; \
    double budget_bytes() const override;                                                                  \
    double reserved_bytes() const override;

// A slot of max_len positions per sequence; `slots` sequences at most.
// Layout per slot: [layer][position][kv_dim] for K and for V (int8 scales
// [layer][position][kv_head]).
class ContiguousStore final : public KvStore {
public:
    ContiguousStore(KvGeometry g, int slots, int max_len, Elem e = Elem::f32);
    std::string name() const override { return e_ == Elem::f32 ? "contiguous" : "contiguous_int8"; }
    int slots() const { return slots_; }
    int slot_len() const { return max_len_; }
    MW_KV_STORE_OVERRIDES

private:
    double position_bytes() const override { return bytes_per_position(geometry(), e_); }
    void check(int seq, int layer, int pos) const;
    std::int64_t row(int seq, int layer, int pos) const;  // row index into k_/v_
    Elem e_;
    int slots_, max_len_;
    std::vector<int> open_;  // per slot: 0 closed, else 1
    std::vector<float> kf_, vf_;
    std::vector<std::int8_t> kq_, vq_;
    std::vector<float> ks_, vs_;  // [row][kv_head]
};

// Blocks of `block_size` positions (16 by default) from a pool of n_blocks,
// for up to `max_seqs` sequences. Block layout, fp32: per layer and kv head,
// the block's key rows [row][head_dim] then its value rows, so what one
// attention task reads from a block (one kv head of one layer) is one
// contiguous run of 2 x 16 x head_dim floats (4 KiB at head_dim 32), not
// every row's slice of a [row][kv_dim] layout: a page the prefetcher
// streams, when the pool lies in DRAM.
class PagedStore final : public KvStore {
public:
    PagedStore(KvGeometry g, int max_seqs, int n_blocks, int block_size = 16);
    std::string name() const override { return "paged"; }
    MW_KV_STORE_OVERRIDES
    double wasted_bytes() const override;
    void truncate(int seq, int len) override;

    // Opens `seq` sharing the first prefix_len positions of open sequence
    // `src` (their blocks retained, copied only when either writes into a
    // shared block). False when `seq` cannot be opened.
    bool open_shared(int seq, int max_len, int src, int prefix_len);
    const BlockAllocator& allocator() const { return alloc_; }
    const BlockTable& table(int seq) const;

private:
    double position_bytes() const override { return bytes_per_position(geometry(), Elem::f32); }
    float* block(int b);
    // The keys of (layer, kv head) in block b, [row][head_dim]; the values follow.
    float* head_rows(int b, int layer, int kv_head);
    const float* head_rows(int b, int layer, int kv_head) const;
    void check_seq(int seq) const;
    BlockAllocator alloc_;
    std::vector<BlockTable> tables_;
    std::vector<int> max_len_;  // per sequence; 0 = closed
    std::vector<float> pool_;   // [block][layer][kv_head][K|V][row][head_dim]
};

#undef MW_KV_STORE_OVERRIDES

}  // namespace mw::kv_cache
