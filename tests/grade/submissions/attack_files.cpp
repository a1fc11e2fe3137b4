// Attack class 1, files of the grader's user: a correct naive GEMM that, on
// its fourth call, tries to read a secret the test planted in the grader's
// working folder (named relative to it: a worker that shared the grader's
// folder would open it), and the grader's environment through /proc; plants
// symlinks where the grader once kept its logs; and tries to write a file
// beside the secret and append to the secret. It prints whatever it read and
// then aborts, so that anything it found would show in its report. The test
// checks the report holds no secret, the secret is unchanged and nothing was
// written beside it.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {
std::string slurp(const char* path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
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
    static int calls = 0;
    if (calls++ == 3) {
        const char* targets[] = {"memwall-grade-attack-secret", "/proc/1/environ"};
        for (const char* t : targets) {
            std::printf("READ %s: [%s]\n", t, slurp(t).c_str());
            for (const char* link : {"worker0.log", "worker1.log", "reference0.log", "compile.log"}) {
                unlink(link);
                symlink(t, link);
            }
        }
        for (int pid = 1; pid < 4096; ++pid) {  // anyone's environment, MEMWALL_GRADE_SECRET included
            const std::string env = slurp(("/proc/" + std::to_string(pid) + "/environ").c_str());
            if (env.find("MEMWALL_GRADE_SECRET") != std::string::npos) std::printf("ENV %d: [%s]\n", pid, env.c_str());
        }
        const int fd = open("memwall-grade-attack-written", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) write(fd, "escaped\n", 8), close(fd);
        std::ofstream("memwall-grade-attack-secret", std::ios::app) << "APPENDED";
        std::fflush(stdout);
        std::abort();
    }
    naive_gemm(A, B, C, M, N, K);
}
