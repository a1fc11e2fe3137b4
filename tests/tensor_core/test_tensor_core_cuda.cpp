// The tensor-core wrappers (kernels/cuda/tensor_core.cuh) on a real GPU: the
// test kernels of tests/emu/tensor_core.cu compiled by nvcc, so mma.sync and
// ldmatrix are the PTX instructions, held to the same checks as under the
// emulator (tests/emu/tensor_core_cases.hpp; EmuTensorCore.* there):
//
//   TensorCoreCuda  the mma product on the documented fragment layouts (bf16
//                   and f16), a planted wrong fragment's wrong product,
//                   ldmatrix x1/x2/x4 with and without .trans lane by lane,
//                   the ldmatrix-fed mma equal to A B: SKIPPED without a GPU,
//                   or on one older than sm_80, never passed.
#include <gtest/gtest.h>

#include <string>

#include <cuda_runtime.h>

#include "harness/gpu.hpp"
#include "tests/emu/tensor_core_cases.hpp"

namespace {

namespace cases = mw::test::tensor_core;

// Why the instructions cannot run here (mma.sync.m16n8k16 with bf16 and
// ldmatrix need sm_80 or later), or empty.
std::string tensor_cores_absent() {
    if (!mw::cuda_backend_built()) return "CUDA backend not built";
    if (mw::gpu_count() == 0) return "no GPU: " + mw::gpu_absent_reason();
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return "cannot read the GPU's properties";
    if (prop.major < 8)
        return std::string(prop.name) + " is sm_" + std::to_string(prop.major * 10 + prop.minor) +
               ": mma.sync.m16n8k16 (bf16) and ldmatrix need sm_80 or later";
    return "";
}

#define MW_TENSOR_CORES_OR_SKIP()                                        \
    if (const std::string why = tensor_cores_absent(); !why.empty()) GTEST_SKIP() << why

TEST(TensorCoreCuda, MmaFollowsThePtxFragmentLayouts) {
    MW_TENSOR_CORES_OR_SKIP();
    cases::check_mma_follows_the_ptx_layouts();
}

TEST(TensorCoreCuda, LdmatrixFollowsThePtxLayouts) {
    MW_TENSOR_CORES_OR_SKIP();
    cases::check_ldmatrix_follows_the_ptx_layouts();
}

TEST(TensorCoreCuda, MmaFromLdmatrixFragmentsIsTheProduct) {
    MW_TENSOR_CORES_OR_SKIP();
    cases::check_mma_from_ldmatrix_fragments_is_the_product();
}

TEST(TensorCoreCuda, CpAsyncGroupsLandInOrder) {
    MW_TENSOR_CORES_OR_SKIP();
    cases::check_cp_async_groups_land_in_order();
}

TEST(TensorCoreCuda, WmmaIsTheProduct) {
    MW_TENSOR_CORES_OR_SKIP();
    cases::check_wmma_is_the_product();
}

}  // namespace
