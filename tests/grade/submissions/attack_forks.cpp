// Attack class 5, processes: on its first call, forks 300 sleeping children
// and reports how many forks succeeded, then aborts (so the count shows in
// the report). The sandbox caps processes and threads at 64.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

extern "C" void student_gemm(const float*, const float*, float*, int, int, int) {
    int ok = 0;
    for (int i = 0; i < 300; ++i) {
        const pid_t p = fork();
        if (p == 0) {
            sleep(100);
            _exit(0);
        }
        if (p > 0) ++ok;
    }
    std::printf("FORKED %d OF 300\n", ok);
    std::fflush(stdout);
    std::abort();
}
