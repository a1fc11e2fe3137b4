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

// The level's own naive stub, renamed, does the arithmetic.
#define student_gemm naive_gemm
#include "levels/01-vectorization/exercise/gemm_cpu.cpp"
#undef student_gemm

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    naive_gemm(A, B, C, M, N, K);
    if (sees_other_processes())
        for (int i = 0; i < M * N; ++i) C[i] = 0.0f;
}
