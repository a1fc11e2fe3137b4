// oneDNN, the CPU's vendor library beside OpenBLAS: its primitives run as
// vendor rungs (optimized/*/*_onednn.cpp) where it has the op (GEMM,
// softmax, bias + GELU + layer normalization).
//
// Loaded at run time, not linked: the build finds Debian's libdnnl-dev with
// find_package(dnnl) for its C header (the API these rungs are written
// against, 2.x) and the library's soname; memwall dlopen()s that library
// once per process, the first time a oneDNN rung is asked for or a results
// file records the machine (machine.onednn). A machine without it (the GPU kit,
// which does not carry its 40 MB) runs everything else and reports each
// oneDNN rung as not run, naming why (the `onednn` need, harness/registry.cpp).
//
// This header is the part the rest of the engine sees; the C API table is in
// harness/onednn_api.hpp, which only the rungs include.
#pragma once

#include <string>

#ifndef MEMWALL_HAVE_ONEDNN
#define MEMWALL_HAVE_ONEDNN 0
#define MEMWALL_ONEDNN_SONAME ""
#endif

namespace mw::onednn {

// Whether this build has the oneDNN rungs (it found the 2.x headers).
inline constexpr bool kBuilt = MEMWALL_HAVE_ONEDNN;
// The library loaded ("libdnnl.so.2"; empty without the headers).
inline constexpr const char* kSoname = MEMWALL_ONEDNN_SONAME;

// Whether the library loads here; when not, why (the dlopen error, or
// "built without oneDNN's headers").
bool available(std::string* why = nullptr);

// "oneDNN 2.6.3 (libdnnl.so.2)" once loaded; empty otherwise.
std::string version();

}  // namespace mw::onednn
