// Attack class 6, a library the exercise forbids: loads OpenBLAS at run time
// (no -l flag needed) and calls its sgemm. The sandbox hides every BLAS
// library unless the level allows one, so the load fails and says so.
#include <dlfcn.h>

#include <stdexcept>
#include <string>

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    void* lib = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so", "libblas.so.3", "libcblas.so.3",
                             "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                             "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"})
        if ((lib = dlopen(name, RTLD_NOW))) break;
    if (!lib) throw std::runtime_error("cannot load BLAS: " + std::string(dlerror()));
    using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
    auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
    if (!sgemm) throw std::runtime_error("cannot load BLAS: no cblas_sgemm");
    sgemm(101, 111, 111, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);  // row-major, no transposes
}
