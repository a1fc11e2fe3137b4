// GPU hooks for a build without the CUDA backend.
#include "harness/gpu.hpp"

namespace mw {
int gpu_count() { return 0; }
std::string gpu_absent_reason() { return "the CUDA backend was not built (nvcc not found or MEMWALL_CUDA=OFF)"; }
nlohmann::json gpu_machine_info() { return nlohmann::json::object(); }
void calibrate_gpu(Ceilings&, bool) {}
bool cuda_backend_built() { return false; }
}  // namespace mw
