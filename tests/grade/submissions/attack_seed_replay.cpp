// Attack on the grade's inputs, first step: learn what a call's inputs are
// made from, to regenerate them later. Every call's inputs come from a seed
// the submission may work back to from the inputs (the generators are not
// one-way), so a seed learnt in one grade — thrown back in a message, as
// here, or computed — let a resubmission under the same instructor's secret
// (or another level graded with it) regenerate its timed inputs during the
// untimed check call and answer each timed call with a copy. This control
// throws the first call's input bits; the test grades it twice with the same
// secret, and once more at the same public seed. A grade's calls now have
// seeds of their own (a nonce per grade with a secret, the level and
// exercise always): the two secret grades see different inputs; a practice
// seed stays reproducible.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    std::uint32_t a = 0, b = 0;
    std::memcpy(&a, A, 4);
    std::memcpy(&b, B, 4);
    (void)C, (void)M, (void)N, (void)K;
    throw std::runtime_error("INPUT BITS " + std::to_string(a) + " " + std::to_string(b));
}
