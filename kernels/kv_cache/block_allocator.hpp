// The paged KV cache's memory manager: a fixed pool of blocks of
// `block_size` positions, handed out from a free list and reference-counted,
// so that sequences that start with the same prompt can share that prefix's
// blocks and copy one only when they write into it (copy-on-write).
//
// The allocator knows nothing of what a block holds: the paged store
// (kernels/kv_cache/kv_store.hpp) keeps the keys and values, the serving
// simulation only counts. A sequence's blocks are listed, in position order,
// in its BlockTable: position p lives in blocks[p / block_size], row
// p % block_size.
#pragma once

#include <cstdint>
#include <vector>

namespace mw::kv_cache {

class BlockAllocator {
public:
    // Throws std::invalid_argument for n_blocks < 1 or block_size < 1.
    BlockAllocator(int n_blocks, int block_size);

    int block_size() const { return block_size_; }
    int total() const { return int(refs_.size()); }
    int free_count() const { return int(free_.size()); }
    int used() const { return total() - free_count(); }

    // A free block with one reference, or -1 when none is left.
    int allocate();
    // One more sequence holds `block` (it must be in use).
    void retain(int block);
    // One reference fewer; at zero the block returns to the free list.
    // Throws std::logic_error for a block that is not in use (a double free).
    void release(int block);
    int refcount(int block) const;

private:
    int block_size_;
    std::vector<int> refs_;
    std::vector<int> free_;  // a stack: the most recently freed block is reused first
};

struct BlockTable {
    std::vector<int> blocks;
    int len = 0;  // positions the table has room for (a multiple of block_size, or fewer when shared)
};

// Blocks needed for `len` positions.
inline int blocks_for(int len, int block_size) { return (len + block_size - 1) / block_size; }

// Gives `t` room for positions [0, len): allocates the missing blocks. All or
// nothing: false, with `t` and `a` unchanged, when too few blocks are free.
bool grow(BlockAllocator& a, BlockTable& t, int len);
// Releases every block of `t` and empties it.
void release_all(BlockAllocator& a, BlockTable& t);
// A table that shares the first `prefix_len` positions of `src`: its blocks
// are retained, not copied (the last one may be partly filled: whoever
// writes into a shared block first copies it, see make_writable).
BlockTable share_prefix(BlockAllocator& a, const BlockTable& src, int prefix_len);
// Before writing position `pos` of `t`: if the block holding it is shared,
// `t` gets a fresh block in its place and the pair {old, fresh} is returned
// so the caller copies the contents; {-1, -1} when the block was already
// private. Returns {old, -2} when a copy is needed but no block is free
// (nothing changed).
struct CowCopy { int from = -1, to = -1; };
CowCopy make_writable(BlockAllocator& a, BlockTable& t, int pos);

}  // namespace mw::kv_cache
