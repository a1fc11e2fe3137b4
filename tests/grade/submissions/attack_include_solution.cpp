// Attack class 2, points not earned: one line that includes the
// instructor's reference solution, which is in the repository the student
// was given. The compiler does not see the solutions: a compile error.
#include "levels/01-vectorization/exercise/solutions/gemm_cpu_reference.cpp"
