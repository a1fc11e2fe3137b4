// Attack class 1, files of the grader's user: a correct naive GEMM that, on
// its first call, tries to read a secret the test planted outside the sandbox
// (and the grader's environment through /proc), plants symlinks where the
// grader once kept its logs, and tries to write a file outside the sandbox.
// It prints whatever it managed to read and then aborts, so that anything it
// found would show in its report. The test checks the report holds no secret,
// the secret is unchanged and nothing was written outside.
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

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static int calls = 0;
    if (calls++ == 3) {
        const char* targets[] = {"/tmp/memwall-grade-attack-secret", "/proc/1/environ", "/etc/shadow",
                                 "/root/.bash_history"};
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
        const int fd = open("/tmp/memwall-grade-attack-written", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) write(fd, "escaped\n", 8), close(fd);
        std::ofstream("/tmp/memwall-grade-attack-secret", std::ios::app) << "APPENDED";
        std::fflush(stdout);
        std::abort();
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
