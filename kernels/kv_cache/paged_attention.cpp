// The paged-attention launchers per CUDA backend (kernels/kv_cache/
// paged_attention.hpp), registered by each build of paged_attention.cu;
// a backend that was not built returns nullptr instead of failing to link.
#include "kernels/kv_cache/paged_attention.hpp"

#include <stdexcept>

namespace mw::kv_cache {
namespace {

// A function-local static: the .cu registrars may run before this file's
// globals are initialized.
const PagedKernels*& slot(Backend b) {
    static const PagedKernels* cuda = nullptr;
    static const PagedKernels* cuda_emu = nullptr;
    switch (b) {
        case Backend::cuda: return cuda;
        case Backend::cuda_emu: return cuda_emu;
        default: throw std::invalid_argument("no paged-attention kernels for backend " + to_string(b));
    }
}

}  // namespace

const PagedKernels* paged_kernels(Backend backend) {
    if (backend == Backend::cpu) return nullptr;
    return slot(backend);
}

namespace detail {
bool register_paged_kernels(Backend backend, const PagedKernels* table) {
    slot(backend) = table;
    return true;
}
}  // namespace detail

}  // namespace mw::kv_cache
