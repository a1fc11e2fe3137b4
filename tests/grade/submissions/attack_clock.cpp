// Attack class 2, speed credit without speed (level 04): the naive stub of
// level 04, with clock_gettime() redefined to stand still, so an adapter that
// timed the call with the process's own clock would report zero seconds.
// Every time is taken by the grader now, so this earns what the stub earns.
#include <ctime>

extern "C" int clock_gettime(clockid_t, struct timespec* t) {
    t->tv_sec = 1000;
    t->tv_nsec = 0;
    return 0;
}

// The level's own naive stub is the answer.
#include "levels/04-precision/exercise/dequant_gemv_int4_g64_cpu.cpp"
