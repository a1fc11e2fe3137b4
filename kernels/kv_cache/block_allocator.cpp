// The paged KV cache's block pool (kernels/kv_cache/block_allocator.hpp).
#include "kernels/kv_cache/block_allocator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mw::kv_cache {

BlockAllocator::BlockAllocator(int n_blocks, int block_size) : block_size_(block_size) {
    if (n_blocks < 1) throw std::invalid_argument("block pool of " + std::to_string(n_blocks) + " blocks: need at least 1");
    if (block_size < 1) throw std::invalid_argument("block size " + std::to_string(block_size) + ": need at least 1");
    refs_.assign(std::size_t(n_blocks), 0);
    free_.reserve(std::size_t(n_blocks));
    for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 handed out first
}

int BlockAllocator::allocate() {
    if (free_.empty()) return -1;
    const int b = free_.back();
    free_.pop_back();
    refs_[std::size_t(b)] = 1;
    return b;
}

int BlockAllocator::refcount(int block) const {
    if (block < 0 || block >= total())
        throw std::out_of_range("block " + std::to_string(block) + " outside the pool of " + std::to_string(total()));
    return refs_[std::size_t(block)];
}

void BlockAllocator::retain(int block) {
    if (refcount(block) == 0) throw std::logic_error("retain of free block " + std::to_string(block));
    ++refs_[std::size_t(block)];
}

void BlockAllocator::release(int block) {
    if (refcount(block) == 0) throw std::logic_error("release of free block " + std::to_string(block) + " (double free)");
    if (--refs_[std::size_t(block)] == 0) free_.push_back(block);
}

bool grow(BlockAllocator& a, BlockTable& t, int len) {
    const int need = blocks_for(len, a.block_size()) - int(t.blocks.size());
    if (need > a.free_count()) return false;
    for (int i = 0; i < need; ++i) t.blocks.push_back(a.allocate());
    t.len = std::max(t.len, len);
    return true;
}

void release_all(BlockAllocator& a, BlockTable& t) {
    for (int b : t.blocks) a.release(b);
    t.blocks.clear();
    t.len = 0;
}

BlockTable share_prefix(BlockAllocator& a, const BlockTable& src, int prefix_len) {
    if (prefix_len < 0 || prefix_len > src.len)
        throw std::invalid_argument("shared prefix of " + std::to_string(prefix_len) + " positions: the source holds " +
                                    std::to_string(src.len));
    BlockTable t;
    for (int i = 0; i < blocks_for(prefix_len, a.block_size()); ++i) {
        a.retain(src.blocks[std::size_t(i)]);
        t.blocks.push_back(src.blocks[std::size_t(i)]);
    }
    t.len = prefix_len;
    return t;
}

CowCopy make_writable(BlockAllocator& a, BlockTable& t, int pos) {
    const std::size_t i = std::size_t(pos / a.block_size());
    if (pos < 0 || i >= t.blocks.size())
        throw std::out_of_range("position " + std::to_string(pos) + " outside the table's " +
                                std::to_string(t.blocks.size()) + " blocks");
    const int old = t.blocks[i];
    if (a.refcount(old) == 1) return {};
    const int fresh = a.allocate();
    if (fresh < 0) return {old, -2};
    a.release(old);
    t.blocks[i] = fresh;
    return {old, fresh};
}

}  // namespace mw::kv_cache
