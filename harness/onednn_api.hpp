// oneDNN's C API as the vendor rungs call it: a table of the functions they
// use, filled by dlsym() from the library harness/onednn.cpp loads (see
// harness/onednn.hpp for why it is loaded, not linked), and one helper,
// Bound: a primitive made once in prepare() and run on the problem's own
// buffers in the timed call.
// Only the rungs include this header (it needs oneDNN's headers, which the
// build has only when find_package(dnnl) found them: MEMWALL_HAVE_ONEDNN).
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/onednn.hpp"
#include "harness/registry.hpp"

// Every function of the C API the rungs and the loader call.
#define MW_ONEDNN_FUNCTIONS(X)                                                                                    \
    X(dnnl_version) X(dnnl_engine_create) X(dnnl_stream_create) X(dnnl_stream_wait) X(dnnl_stream_destroy)        \
    X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_get_size) X(dnnl_memory_create) X(dnnl_memory_destroy)     \
    X(dnnl_matmul_desc_init) X(dnnl_softmax_forward_desc_init) X(dnnl_layer_normalization_forward_desc_init)      \
    X(dnnl_binary_desc_init) X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy)                          \
    X(dnnl_primitive_attr_set_scratchpad_mode) X(dnnl_primitive_attr_set_post_ops) X(dnnl_post_ops_create)        \
    X(dnnl_post_ops_destroy) X(dnnl_post_ops_append_eltwise) X(dnnl_primitive_desc_create)                         \
    X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_desc_destroy)                    \
    X(dnnl_primitive_create) X(dnnl_primitive_destroy) X(dnnl_primitive_execute)

namespace mw::onednn {

struct Api {
#define MW_ONEDNN_POINTER(name) decltype(&::name) name = nullptr;
    MW_ONEDNN_FUNCTIONS(MW_ONEDNN_POINTER)
#undef MW_ONEDNN_POINTER
    dnnl_engine_t engine = nullptr;  // the CPU engine, one per process
};

// The loaded table; throws std::runtime_error naming why when the library
// does not load (a rung's prepare() only runs after available() said yes).
const Api& api();

// Throws std::runtime_error naming the call unless oneDNN reports success.
void check(dnnl_status_t status, const char* what);

// An fp32 memory descriptor: dims outermost first, laid out as `tag`
// (dnnl_a for a vector, dnnl_ab for a row-major matrix).
dnnl_memory_desc_t f32_desc(std::initializer_list<dnnl_dim_t> dims, dnnl_format_tag_t tag);

// One primitive, made from an op descriptor (and post-ops) with a
// scratchpad we allocate (the harness's tracker counts it, where oneDNN's
// own allocator would hide it), its arguments bound to fixed buffers.
// run() executes it on a stream of its own and waits.
class Bound {
public:
    // op_desc: the address of a dnnl_*_desc_t; post_ops may be null.
    explicit Bound(const void* op_desc, const_dnnl_post_ops_t post_ops = nullptr);
    ~Bound();
    Bound(const Bound&) = delete;
    Bound& operator=(const Bound&) = delete;

    // Binds argument `which` (DNNL_ARG_*) to `data`, described by `md`.
    void arg(int which, const dnnl_memory_desc_t& md, const void* data);
    void run() const;
    // oneDNN's name for the implementation it picked ("brg:avx512_core",
    // "jit:uni", "ref:any"): the row's `path`.
    std::string implementation() const;

private:
    void make(const void* op_desc, const_dnnl_post_ops_t post_ops);
    void release() noexcept;

    dnnl_primitive_desc_t pd_ = nullptr;
    dnnl_primitive_t prim_ = nullptr;
    dnnl_stream_t stream_ = nullptr;
    std::map<int, dnnl_memory_t> args_;
    std::vector<dnnl_exec_arg_t> exec_;  // args_ as execute() takes them
    Buffer scratch_;
};

// C[M,N] = A[M,K] B[K,N] in fp32, all three row-major.
std::shared_ptr<Bound> matmul_f32(const float* A, const float* B, float* C, long M, long N, long K);

// An Instance whose run() runs the bound primitives in order, its path their
// implementations joined by " + "; `keep` (a temporary between them) lives
// as long as the Instance.
Instance instance_of(std::vector<std::shared_ptr<Bound>> chain, std::shared_ptr<const void> keep = nullptr);

}  // namespace mw::onednn
