// serve, rung 1: continuous batching on a paged cache.
//
// Change from rung 0: the budget is a pool of blocks of 16 positions
// (kernels/kv_cache/kv_store.hpp's PagedStore), and the scheduler works
// per iteration, not per batch:
//   - a running request takes a block only when its next position crosses
//     into one (it holds at most one partly filled block), and returns all
//     of them the iteration it ends;
//   - a waiting request is admitted, first come first served, as soon as
//     the blocks of its prompt are free, keeping 1% of the pool (at least a
//     block) free for the running ones to grow into while any run;
//   - when the pool runs dry all the same, the most recently admitted
//     request is preempted: its blocks are freed and it goes back to the
//     head of the queue, to recompute its cache (its prompt and the tokens
//     it has generated) when it is admitted again (counted: preemptions,
//     recomputed_tokens). Output lengths are never used to plan: a server
//     does not know them.
//   - the shared prompt prefix every request starts with is computed once,
//     into a holder sequence that keeps it for the whole run, and every
//     request opens with the prefix's blocks shared (open_shared: reference
//     counts, no copy). Like vLLM's prefix cache only whole blocks are
//     shared (the prefix's last partial block, if any, each request
//     computes itself), so no request writes into a shared block and the
//     store's copy-on-write never has to fire.
// Expected: concurrency limited by the tokens actually held, not by
// max_len: at mean 500 of max 4096 several times rung 0's; waste under one
// block per sequence where rung 0 wastes most of every slot; more tokens per
// step, so more tokens/s; and shorter waits to the first token.
#include <algorithm>
#include <memory>

#include "reference/kv_cache/serve.hpp"

namespace mw::kv_cache {

ServeResult serve_continuous(const Trace& t, PagedStore& store, model::cpu::Decoder& dec, int max_len) {
    ServeEngine e(t, store, dec);
    const auto& pool = store.allocator();
    const int bs = pool.block_size(), total = pool.total(), holder = int(t.requests.size());
    const int reserve = std::max(1, total / 100);
    const int shared = t.shared / bs * bs;  // whole blocks
    const int shared_blocks = shared / bs;
    if (shared > 0) {
        store.open(holder, shared);
        store.grow(holder, shared);
        e.run_rows(holder, std::vector<int>(t.requests[0].prompt.begin(), t.requests[0].prompt.begin() + shared));
    }
    std::vector<int> running;  // in admission order
    auto preempt = [&](int r) {
        store.close(e.seq(r));
        e.note_preemption(e.context_len(r) - 1 - shared);
        e.release(r);
        running.erase(std::find(running.begin(), running.end(), r));
        e.waiting().push_front(r);
    };
    while (!e.finished()) {
        e.begin_iteration();
        // Room for every running request's next position, oldest first.
        for (std::size_t i = 0; i < running.size(); ++i)
            while (i < running.size() && !store.grow(e.seq(running[i]), e.context_len(running[i])))
                preempt(running.back());
        const std::size_t decoding = running.size();
        // Admissions, first come first served: the blocks its context
        // needs beyond the shared ones (a preempted request's context holds
        // its tokens so far).
        while (!e.waiting().empty()) {
            const int r = e.waiting().front(), len = e.request(r).length();
            if (len > max_len || blocks_for(len - 1, bs) > total) {
                e.waiting().pop_front();
                e.reject(r, std::to_string(len) + " positions exceed " +
                                (len > max_len ? "max_len = " + std::to_string(max_len)
                                               : "the pool of " + std::to_string(total) + " blocks of " +
                                                     std::to_string(bs)));
                continue;
            }
            const int need = blocks_for(e.context_len(r), bs) - shared_blocks;
            if (need + (running.empty() ? 0 : reserve) > pool.free_count()) break;
            e.waiting().pop_front();
            const bool opened = shared > 0 ? store.open_shared(r, len, holder, shared) : store.open(r, len);
            if (!opened || !store.grow(r, e.context_len(r)))
                throw std::logic_error("serve: request " + std::to_string(r) + " admitted without room");
            e.admit(r, r);
            e.feed(r, shared);
            running.push_back(r);
        }
        for (std::size_t i = 0; i < decoding; ++i) e.feed(running[i], e.context_len(running[i]) - 1);
        e.end_iteration();
        for (std::size_t i = running.size(); i-- > 0;) {
            const int r = running[i];
            if (!e.done(r)) continue;
            store.close(e.seq(r));
            e.release(r);
            running.erase(running.begin() + std::ptrdiff_t(i));
        }
    }
    if (shared > 0) store.close(holder);
    return e.result();
}

}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(serve_continuous_paged_cpu, {
    .name = "continuous_paged", .op = "serve", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "continuous batching on blocks of 16 positions: admitted when its prompt's blocks are free, a block "
                 "taken as it grows, all returned when it ends, the shared prompt prefix's blocks shared",
    .needs = {"avx2"},
    .prepare = [](mw::Problem& p) {
        const auto& c = mw::kv_cache::serve_model(int(p.shape["max_len"])).config;
        const int n = int(p.in("arrival").count);
        auto store = std::make_shared<mw::kv_cache::PagedStore>(
            mw::kv_cache::KvGeometry{c.layers, c.kv_heads, c.head_dim()}, n + 1,
            int(mw::kv_cache::budget_positions(p.shape) / 16));
        const int max_len = int(p.shape["max_len"]);
        return mw::kv_cache::serve_instance(p, store, [store, max_len](const mw::kv_cache::Trace& t,
                                                                       mw::model::cpu::Decoder& dec) {
            return mw::kv_cache::serve_continuous(t, *store, dec, max_len);
        });
    } });
