// The axpy op, out[n] = 2 x[n] + y[n], fp32: a throwaway lever that checks
// the "Adding a lever" checklist.
//
// The scratch lever's ladder:
//   reference/scratch/axpy.cpp          rung 0  naive scalar loop, one thread
//   optimized/scratch/axpy_threads.cpp     1  the same loop on all cores, vectorized
//   reference/scratch/axpy.cu           rung 0  one CUDA thread per element
#pragma once

#include "harness/registry.hpp"

namespace mw::scratch {
inline double axpy_bytes(const Shape& s, DType) { return 12.0 * double(s["n"]); }
}  // namespace mw::scratch
