#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "commands/cli.hpp"

namespace {

// Debian's OpenBLAS 0.3.21 does not know recent Xeons (this project's
// machine, family 6 model 207, among them): it falls back to its SSE3
// "Prescott" kernels, several times slower than its AVX-512 ones, which would
// make the vendor rung a straw man. The core type is read once, when the library loads, so when the user has not chosen
// one we pick it from the CPU's features and re-execute ourselves.
// MEMWALL_OPENBLAS_CORETYPE=keep leaves OpenBLAS to its own detection.
void choose_openblas_core(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("MEMWALL_OPENBLAS_CORETYPE")) return;
    __builtin_cpu_init();
    const char* core = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        core = "Haswell";
    if (!core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    setenv("MEMWALL_OPENBLAS_CORETYPE", "auto", 1);  // chosen by memwall; also stops a second re-exec
    execv("/proc/self/exe", argv);
    std::perror("memwall: re-exec to set OPENBLAS_CORETYPE failed; continuing with OpenBLAS's own detection");
}

}  // namespace

int main(int argc, char** argv) {
    choose_openblas_core(argv);
    return mw::cli_main(argc, argv);
}
