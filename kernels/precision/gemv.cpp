// Format dispatch of the GEMV rungs (kernels/precision/gemv.hpp).
#include "kernels/precision/gemv.hpp"

#include <stdexcept>

namespace mw::precision {

void gemv(const QMatrix& m, const float* x, std::int64_t b, float* y) {
    switch (m.spec.format) {
        case Format::f32: return cpu::gemv_f32(m, x, b, y);
        case Format::bf16:
        case Format::f16: return cpu::gemv_half(m, x, b, y);
        case Format::int8_channel: return cpu::gemv_int8(m, x, b, y);
        case Format::int4: return cpu::gemv_int4(m, x, b, y);
        case Format::int8_tensor: break;
    }
    throw std::invalid_argument("gemv: no CPU kernel for format " + describe(m.spec) +
                                " (choices: f32, bf16, f16, int8_channel, int4)");
}

}  // namespace mw::precision
