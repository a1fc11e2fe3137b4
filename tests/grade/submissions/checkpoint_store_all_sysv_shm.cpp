// Attack on level 05 (found by a red-team pass): store_all, every block's
// activations kept and nothing recomputed, under the memory limit. The
// per-process address-space limit (RLIMIT_AS) counts mappings, so the
// activations go into System V shared memory segments, each attached only
// while its block runs; the cgroup's charge is brought under the old 768 MiB
// limit (keeping everything needs ~780 MiB) by parking the last block's
// activations in the dparams output and its output in dx (the call's shared
// pages, which the grader touched first and which are charged to it). It
// scored 100/100. Now the seccomp filter refuses System V IPC (ENOSYS), and
// the limit is 448 MiB, far below what keeping everything needs, so that no
// parking can make up the difference.
#include <sys/mman.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>
#include <fcntl.h>
#include <algorithm>
#include <vector>
#include <stdexcept>

#include "kernels/model/block_cpu.hpp"

namespace {
using mw::model::cpu::BlockActs;
using mw::model::cpu::BlockSizes;
struct Item { float** p; std::size_t n; };
void carve(BlockActs& A, const BlockSizes& sz, float*& at, std::size_t& n_free, std::vector<float>& heap) {
    Item items[] = {{&A.p, sz.p}, {&A.a, sz.a}, {&A.b, sz.b}, {&A.h, sz.h}, {&A.xn1, sz.xn1},
                    {&A.q, sz.q}, {&A.o, sz.o}, {&A.x_mid, sz.x_mid}, {&A.xn2, sz.xn2},
                    {&A.k, sz.k}, {&A.v, sz.v}, {&A.r1, sz.r1}, {&A.r2, sz.r2}};
    std::size_t need = 0;
    for (auto& it : items) {
        if (it.n <= n_free) { *it.p = at; at += it.n; n_free -= it.n; }
        else { need += it.n; *it.p = nullptr; }
    }
    heap.resize(need);
    float* h = heap.data();
    for (auto& it : items) if (!*it.p) { *it.p = h; h += it.n; }
}
}  // namespace

extern "C" void student_train_step(const float* x, const float* params, const float* dy, float* loss, float* dparams,
                                   float* dx, int layers, int tokens, int seq, int d_model, int heads, int kv_heads,
                                   int d_ff) {
    namespace model = mw::model;
    model::Config c;
    c.layers = layers, c.d_model = d_model, c.heads = heads, c.kv_heads = kv_heads, c.d_ff = d_ff, c.max_seq = seq;
    const int B = tokens / seq, L = layers;
    const std::size_t P = model::layer_param_count(c), X = std::size_t(tokens) * std::size_t(d_model);
    model::cpu::Block block(c, B, seq);
    const BlockSizes sz(c, B, seq);
    const std::size_t page = 4096;
    const std::size_t blk_bytes = (sz.all() * sizeof(float) + page - 1) / page * page;
    const std::size_t in_bytes = (X * sizeof(float) + page - 1) / page * page;

    // SysV shm segments (not files: RLIMIT_FSIZE caps memfds at 4 MiB), attached only while used:
    // ids [0, L-1): block inputs 1..L-1; ids [L-1, 2L-2): activations of blocks 0..L-2
    const std::size_t n_in = std::size_t(L > 1 ? L - 1 : 0);
    std::vector<int> ids(2 * n_in);
    std::vector<std::size_t> sizes(2 * n_in);
    for (std::size_t i = 0; i < 2 * n_in; ++i) {
        sizes[i] = i < n_in ? in_bytes : blk_bytes;
        ids[i] = shmget(IPC_PRIVATE, sizes[i], IPC_CREAT | 0600);
        if (ids[i] < 0) throw std::runtime_error("shmget");
    }
    std::vector<void*> att(ids.size(), nullptr);
    auto map_at = [&](std::size_t id, std::size_t) {
        void* p = shmat(ids[id], nullptr, 0);
        if (p == (void*)-1) throw std::runtime_error("shmat");
        att[id] = p;
        return static_cast<float*>(p);
    };
    auto in_off = [&](int l) { return std::size_t(l - 1); };
    auto blk_off = [&](int l) { return n_in + std::size_t(l); };
    auto munmap = [&](void* p, std::size_t) { shmdt(p); };
    auto acts_from = [&](float* base) {
        BlockActs A{};
        float* at = base;
        std::size_t n = sz.all();
        std::vector<float> none;
        carve(A, sz, at, n, none);
        return A;
    };

    // the last block's activations: in dparams slices 0..L-2, the rest on the heap
    BlockActs last{};
    std::vector<float> last_heap;
    {
        float* at = dparams;
        std::size_t n = std::size_t(L - 1) * P;
        carve(last, sz, at, n, last_heap);
    }

    // forward: map block l's input/output/activations only while it runs
    for (int l = 0; l < L; ++l) {
        const float* xin = l == 0 ? x : map_at(in_off(l), in_bytes);
        float* xout = l == L - 1 ? dx : map_at(in_off(l + 1), in_bytes);
        float* ab = l == L - 1 ? nullptr : map_at(blk_off(l), blk_bytes);
        const BlockActs A = l == L - 1 ? last : acts_from(ab);
        block.forward(model::bind_layer(c, params + l * P), xin, A, xout);
        if (l != 0) munmap(const_cast<float*>(xin), in_bytes);
        if (l != L - 1) munmap(xout, in_bytes), munmap(ab, blk_bytes);
    }
    double sum = 0;
    for (std::size_t i = 0; i < X; ++i) sum += double(dx[i]) * double(dy[i]);
    loss[0] = float(sum);
    std::copy(dy, dy + X, dx);
    for (int l = L - 1; l >= 0; --l) {
        std::fill(dparams + std::size_t(l) * P, dparams + std::size_t(l + 1) * P, 0.0f);
        const float* xin = l == 0 ? x : map_at(in_off(l), in_bytes);
        float* ab = l == L - 1 ? nullptr : map_at(blk_off(l), blk_bytes);
        const BlockActs A = l == L - 1 ? last : acts_from(ab);
        block.backward(model::bind_layer(c, params + l * P), model::bind_layer(c, dparams + l * P), xin, A, dx);
        if (l != 0) munmap(const_cast<float*>(xin), in_bytes);
        if (ab) munmap(ab, blk_bytes);
    }
    for (int id : ids) shmctl(id, IPC_RMID, nullptr);
}
