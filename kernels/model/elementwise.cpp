// The table of element-wise launchers per CUDA backend (kernels/model/elementwise.hpp).
// Each build of kernels/model/elementwise.cu (nvcc for "cuda", the host
// compiler for "cuda-emu") registers its own table here at static
// initialization; a backend that was not built never registers, and its
// lookup returns nullptr instead of failing to link.
#include "kernels/model/elementwise.hpp"

#include <stdexcept>

namespace mw::model {
namespace {

// A function-local static: the .cu registrars may run before this file's
// globals are initialized.
const ElementwiseKernels*& slot(Backend b) {
    static const ElementwiseKernels* cuda = nullptr;
    static const ElementwiseKernels* cuda_emu = nullptr;
    switch (b) {
        case Backend::cuda: return cuda;
        case Backend::cuda_emu: return cuda_emu;
        default: throw std::invalid_argument("no element-wise model kernels for backend " + to_string(b));
    }
}

}  // namespace

const ElementwiseKernels* elementwise_kernels(Backend backend) {
    if (backend == Backend::cpu) return nullptr;
    return slot(backend);
}

namespace detail {
bool register_elementwise_kernels(Backend backend, const ElementwiseKernels* table) {
    slot(backend) = table;
    return true;
}
}  // namespace detail

}  // namespace mw::model
