// How `memwall grade` calls a transpose-cpu submission: compiled together
// with the student's file into the grader's worker program (harness/grade/
// grade_worker.hpp). Buffers arrive in the op's order: input `in` [R][C],
// output `out` [C][R] (already poisoned with NaN by the grader).
//
// A transpose that forgets to clip its edge tiles writes past the end of
// `out`. In the grader's shared mapping that would land in unused space
// (the mapping is sized for the largest shape) and go unseen, so the adapter
// hands the submission its own copies of `in` and `out` instead, each placed
// so that its last byte is followed by an unmapped (PROT_NONE) region and its
// first byte is preceded by a canary-filled gap and another unmapped region:
//   - an access past the end of either matrix is a SIGSEGV;
//   - a write before the start either faults or changes the canary, which is
//     reported after the call.
// Per call: copy `in` and the poisoned `out` into the guarded copies, time
// only the submission's call (grading "timing": "call"; the reference
// variant's run() is timed the same way by the grader), then copy `out` back
// and `in` back too, so that the grader's unchanged-input check also catches
// a submission that writes into its input. The copies are kept across calls
// of the same size, so their pages are faulted in once, as the shared
// mapping's are for the reference; both sides use 4 KiB pages.
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "harness/grade/grade_worker.hpp"

extern "C" void student_transpose(const float* in, float* out, int rows, int cols);

namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kGuard = std::size_t(16) << 20;  // unmapped bytes on each side
constexpr unsigned char kCanary = 0xA5;

struct Guarded {
    unsigned char* map = nullptr;
    std::size_t map_bytes = 0, bytes = 0, gap = 0;  // gap: canary bytes before the data
    unsigned char* data = nullptr;

    void ensure(std::size_t want) {
        if (map && bytes == want) return;
        if (map) munmap(map, map_bytes);
        const std::size_t span = (want + kPage - 1) / kPage * kPage;
        map_bytes = kGuard + span + kGuard;
        void* m = mmap(nullptr, map_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) throw std::runtime_error("grade adapter: cannot reserve a guarded buffer");
        map = static_cast<unsigned char*>(m);
        if (mprotect(map + kGuard, span, PROT_READ | PROT_WRITE) != 0)
            throw std::runtime_error("grade adapter: cannot map a guarded buffer");
        madvise(map + kGuard, span, MADV_NOHUGEPAGE);  // the shared mapping has 4 KiB pages too
        bytes = want;
        gap = span - want;
        data = map + kGuard + gap;  // ends exactly where the trailing guard begins
        std::memset(map + kGuard, kCanary, gap);
    }

    // The canary gap in front of the data, unchanged?
    std::size_t first_bad_canary() const {
        for (std::size_t i = 0; i < gap; ++i)
            if (map[kGuard + i] != kCanary) return i;
        return gap;
    }
};

void check_gap(const Guarded& g, const char* name) {
    if (const std::size_t bad = g.first_bad_canary(); bad != g.gap)
        throw std::runtime_error("the submission wrote before the start of " + std::string(name) + " (" +
                                 std::to_string(g.gap - bad) + " bytes before its first element)");
}

}  // namespace

void mw_grade_call(mw::grade::Call& c) {
    static Guarded in, out;
    const int rows = c.axis("rows"), cols = c.axis("cols");
    in.ensure(c.in_bytes(0));
    out.ensure(c.out_bytes(0));
    std::memcpy(in.data, c.in<unsigned char>(0), in.bytes);
    std::memcpy(out.data, c.out<unsigned char>(0), out.bytes);  // the grader's NaN poison

    const auto t0 = std::chrono::steady_clock::now();
    student_transpose(reinterpret_cast<const float*>(in.data), reinterpret_cast<float*>(out.data), rows, cols);
    c.device_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::memcpy(c.in_mutable<unsigned char>(0), in.data, in.bytes);
    std::memcpy(c.out<unsigned char>(0), out.data, out.bytes);
    check_gap(in, "in");
    check_gap(out, "out");
}
