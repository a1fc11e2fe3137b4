// Attack class 5, memory: three children each touch 1 GiB (3 GiB in all
// against the level's 2 GiB), which a per-process limit would allow. The
// sandbox's memory cgroup counts them together: they are killed, and the
// report says the memory limit was hit.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

char* volatile keep;  // the memory escapes: the compiler may not drop it

extern "C" void student_gemm(const float*, const float*, float* C, int M, int N, int) {
    for (int c = 0; c < 3; ++c)
        if (fork() == 0) {
            const std::size_t n = std::size_t(1) << 30;
            char* p = static_cast<char*>(std::malloc(n));
            if (p) std::memset(p, 1, n);
            keep = p;
            sleep(2);
            _exit(0);
        }
    char* p = static_cast<char*>(std::malloc(std::size_t(700) << 20));
    if (p) std::memset(p, 1, std::size_t(700) << 20);
    keep = p;
    while (wait(nullptr) > 0) {
    }
    for (int i = 0; i < M * N; ++i) C[i] = 0;
}
