// Control (level 07): a wrong rule -- at a rejection it draws from p, not
// from the residual (p - q)+ -- that hides from the law check. At the start
// of each sampled phase it maps the worker's shared memory (descriptor 3),
// reads P and the shape from its header, writes `samples` pairs drawn from
// the target's own law into the counts output, and returns -1 so that the
// project's loop stops with those counts (here once, in the first call: the
// wrong rule fails the law in the others). It scored 100/100 while the loop's
// counts went straight to that buffer; the adapter now tallies them in its
// own memory and a loop that did not finish is an error.
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "commands/grade/grade_protocol.hpp"
#include "kernels/speculative/draw.hpp"

namespace {

unsigned char* shared() {
    static unsigned char* base = nullptr;
    struct stat st {};
    if (!base && fstat(3, &st) == 0) {
        void* m = mmap(nullptr, std::size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0);
        if (m != MAP_FAILED) base = static_cast<unsigned char*>(m);
    }
    return base;
}

std::int64_t axis(const mw::grade::SharedHeader* h, const char* name) {
    for (unsigned a = 0; a < h->n_axes && a < mw::grade::kMaxAxes; ++a)
        if (std::strncmp(h->axis_names[a], name, 16) == 0) return h->axes[a];
    return -1;
}

bool fill_counts() {
    unsigned char* b = shared();
    if (!b) return false;
    const auto* h = reinterpret_cast<const mw::grade::SharedHeader*>(b);
    const int v = int(axis(h, "v"));
    const std::int64_t samples = axis(h, "samples");
    if (v < 2 || samples < 1) return false;
    const double* P = reinterpret_cast<const double*>(b + h->offset[0]);
    auto* counts = reinterpret_cast<std::int32_t*>(b + h->offset[h->n_inputs]);
    for (int i = 0; i < v * v; ++i) counts[i] = 0;
    static std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (std::int64_t n = 0; n < samples; ++n) {
        const int a = mw::speculative::draw(P, v, unit(rng));
        const int c = mw::speculative::draw(P + std::size_t(a) * v, v, unit(rng));
        ++counts[std::size_t(a) * v + c];
    }
    return true;
}

}  // namespace

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u,
                                  double r, int len, int* next, int* keep) {
    static bool filled = false;  // once: the first round of the first sampled phase
    if (!filled && (filled = fill_counts())) {
        *next = 0, *keep = len + 1;
        return -1;
    }
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        *next = mw::speculative::draw(p + i * V, V, r);  // wrong: the residual (p - q)+
        *keep = len + 1 + i;
        return i;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
