// Attack on level 07's tally, by a red-team pass, a second way in: the
// adapter copied its tally to the shared counts output with std::copy,
// which calls memmove; a submission that defines memmove itself replaces
// libc's for the whole worker (one executable). This one, asked to copy
// v x v int32 into the counts output, writes `samples` pairs drawn from the
// target's law instead. The rule is the wrong one (resample from p). It
// scored 100/100; now the grader rebuilds the counts from the record of the
// rule's answers (harness/replay.hpp), and the wrong rule shows.
#include <sys/mman.h>
#include <sys/stat.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include "commands/grade/grade_protocol.hpp"
#include "kernels/speculative/draw.hpp"

namespace {
unsigned char* shared() {
    static unsigned char* base = nullptr;
    static bool tried = false;
    struct stat st {};
    if (!tried) {
        tried = true;
        if (fstat(3, &st) == 0) {
            void* m = mmap(nullptr, std::size_t(st.st_size), PROT_READ, MAP_SHARED, 3, 0);
            if (m != MAP_FAILED) base = static_cast<unsigned char*>(m);
        }
    }
    return base;
}
std::int64_t axis(const mw::grade::SharedHeader* h, const char* name) {
    for (unsigned a = 0; a < h->n_axes && a < mw::grade::kMaxAxes; ++a) {
        const char* n = h->axis_names[a];
        int i = 0;
        while (i < 16 && name[i] && n[i] == name[i]) ++i;
        if (i < 16 && name[i] == 0 && n[i] == 0) return h->axes[a];
    }
    return -1;
}
unsigned char* shared_mapping_of_worker = nullptr;  // the worker's own mapping: found from the output pointer
}  // namespace

extern "C" void* memmove(void* dst, const void* src, std::size_t n) {
    // Is dst the counts output of the worker's mapping? The worker's mapping
    // is a different address than ours; find its base from dst: the header's
    // offset of the counts buffer is the same in both.
    unsigned char* mine = shared();
    if (mine && n >= 16) {
        const auto* h = reinterpret_cast<const mw::grade::SharedHeader*>(mine);
        const std::int64_t v = axis(h, "v"), samples = axis(h, "samples");
        if (v >= 2 && samples > 0 && n == std::size_t(v * v) * 4 && h->bytes[h->n_inputs] == n) {
            auto* out = static_cast<std::int32_t*>(dst);
            // Same page offset as the counts buffer in our own mapping?
            const std::uint64_t off = h->offset[h->n_inputs];
            if ((reinterpret_cast<std::uintptr_t>(dst) & 4095) == (off & 4095)) {
                const double* P = reinterpret_cast<const double*>(mine + h->offset[0]);
                static std::mt19937_64 rng(4242);
                std::uniform_real_distribution<double> unit(0.0, 1.0);
                for (std::int64_t i = 0; i < v * v; ++i) out[i] = 0;
                for (std::int64_t s = 0; s < samples; ++s) {
                    const int a = mw::speculative::draw(P, int(v), unit(rng));
                    const int c = mw::speculative::draw(P + std::size_t(a) * v, int(v), unit(rng));
                    ++out[std::size_t(a) * v + c];
                }
                return dst;
            }
        }
    }
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    if (d < s) for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
    else for (std::size_t i = n; i-- > 0;) d[i] = s[i];
    return dst;
}

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u,
                                  double r, int len, int* next, int* keep) {
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        *next = mw::speculative::draw(p + i * V, V, r);
        *keep = len + 1 + i;
        return i;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
