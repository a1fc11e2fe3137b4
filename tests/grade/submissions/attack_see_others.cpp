// Attack class 2, the reference within reach: a correct naive GEMM that looks
// for any other process it could read (/proc/<pid>/mem of the reference
// worker, to copy its output for the same inputs) or renice. It answers
// wrongly if it finds one, so a correct grade proves it saw nothing but its
// own sandbox: the sandbox's init (pid 1) and itself.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {
bool sees_other_processes() {
    for (auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const int pid = std::stoi(name);
        if (pid != 1 && pid != getpid()) return true;
    }
    for (int pid = 2; pid < 32768; ++pid)  // renice anything visible that is not ours
        if (pid != getpid() && setpriority(PRIO_PROCESS, pid, 19) == 0) return true;
    return false;
}
}  // namespace

// The level's textbook loop (its stub's) does the arithmetic.
static void naive_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    naive_gemm(A, B, C, M, N, K);
    if (sees_other_processes())
        for (int i = 0; i < M * N; ++i) C[i] = 0.0f;
}
