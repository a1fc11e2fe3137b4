// Attack on level 07's tally, by a red-team pass: the wrong rule (resample
// from p, not the residual) hidden from the law check by rewriting the
// counts the worker's loop tallies. The adapter kept them in a std::vector
// of its own; a submission may replace the global operator new/delete (it
// is one program with the adapter), so this one learns the address of every
// heap block, finds the v x v block of counts, and on the last sample fills
// it with samples - 1 pairs drawn from the target's law (P read from the
// shared mapping). It scored 100/100. Now nothing the worker tallies counts:
// the grader rebuilds the counts from the record of the rule's answers with
// loops of its own (harness/replay.hpp), and the wrong rule shows.
#include <sys/mman.h>
#include <sys/stat.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include "commands/grade/grade_protocol.hpp"
#include "kernels/speculative/draw.hpp"

namespace {
struct Rec { void* p; std::size_t n; };
Rec recs[256];
unsigned nrec = 0;
void note(void* p, std::size_t n) {
    if (n >= 16 && n <= 4 * 64 * 64) recs[nrec++ % 256] = {p, n};
}
void unnote(void* p) {
    for (auto& r : recs) if (r.p == p) r.p = nullptr;
}
unsigned char* shared() {
    static unsigned char* base = nullptr;
    struct stat st {};
    if (!base && fstat(3, &st) == 0) {
        void* m = mmap(nullptr, std::size_t(st.st_size), PROT_READ, MAP_SHARED, 3, 0);
        if (m != MAP_FAILED) base = static_cast<unsigned char*>(m);
    }
    return base;
}
std::int64_t axis(const mw::grade::SharedHeader* h, const char* name) {
    for (unsigned a = 0; a < h->n_axes && a < mw::grade::kMaxAxes; ++a)
        if (std::strncmp(h->axis_names[a], name, 16) == 0) return h->axes[a];
    return -1;
}
std::int32_t* find_tally(int V, std::int64_t samples, std::int64_t* sum_out) {
    std::int32_t* best = nullptr;
    for (unsigned i = 0; i < 256; ++i) {
        Rec& r = recs[(nrec - 1 - i) % 256];
        if (!r.p || r.n != std::size_t(V) * V * 4) continue;
        auto* t = static_cast<std::int32_t*>(r.p);
        std::int64_t s = 0; bool ok = true;
        for (int j = 0; j < V * V && ok; ++j) ok = t[j] >= 0 && t[j] <= samples, s += t[j];
        if (ok && s <= samples) { best = t; *sum_out = s; }  // keep going: earliest (tally precedes d,q,p,u)
    }
    return best;
}
std::int32_t* done_for = nullptr;
std::int64_t done_sum = -1;
}  // namespace

void* operator new(std::size_t n) { void* p = std::malloc(n ? n : 1); if (!p) throw std::bad_alloc(); note(p, n); return p; }
void* operator new[](std::size_t n) { void* p = std::malloc(n ? n : 1); if (!p) throw std::bad_alloc(); note(p, n); return p; }
void operator delete(void* p) noexcept { unnote(p); std::free(p); }
void operator delete[](void* p) noexcept { unnote(p); std::free(p); }
void operator delete(void* p, std::size_t) noexcept { unnote(p); std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { unnote(p); std::free(p); }

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u,
                                  double r, int len, int* next, int* keep) {
    // The wrong rule: resample from p at a rejection.
    int acc = K;
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        acc = i;
        break;
    }
    *next = mw::speculative::draw(p + acc * V, V, r);
    *keep = len + 1 + acc;
    // Hijack, cheaply: a new call is seen by its seed input; the samples done
    // are counted by replaying the loop's own bookkeeping (got < 2).
    static std::int32_t last_seed = -1;
    static const double* lastP = nullptr;
    static double lastP0 = -1;
    static std::int32_t* tally = nullptr;
    static std::int64_t done = 0, samples = 0;
    static int got = 0;
    static bool active = false;
    if (unsigned char* b = shared()) {
        const auto* h = reinterpret_cast<const mw::grade::SharedHeader*>(b);
        const std::int32_t seed = *reinterpret_cast<const std::int32_t*>(b + h->offset[3]);
        const double* P = reinterpret_cast<const double*>(b + h->offset[0]);
        if (seed != last_seed || P != lastP || P[0] != lastP0) {
            last_seed = seed, lastP = P, lastP0 = P[0];
            samples = axis(h, "samples");
            std::int64_t s = -1;
            tally = find_tally(V, samples, &s);
            active = tally && s == 0;
            done = 0, got = 0;
        }
        if (active) {
            if (got == 0 && done == samples - 1) {
                static std::mt19937_64 rng(987654321);
                std::uniform_real_distribution<double> unit(0.0, 1.0);
                for (int i = 0; i < V * V; ++i) tally[i] = 0;
                for (std::int64_t n = 0; n < samples - 1; ++n) {
                    const int a = mw::speculative::draw(P, V, unit(rng));
                    const int c = mw::speculative::draw(P + std::size_t(a) * V, V, unit(rng));
                    ++tally[std::size_t(a) * V + c];
                }
                active = false;
            } else {
                got += acc; if (got > 2) got = 2;
                if (got < 2) ++got;
                if (got == 2) got = 0, ++done;
            }
        }
    }
    return acc;
}
