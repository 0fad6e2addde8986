#include "elementwise.hpp"

#include <algorithm>

#include "error.hpp"
#include "half.hpp"

namespace ddp {

namespace {

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), typename Combine>
void reduce_16(uint16_t* inout, const uint16_t* in, int64_t count, Combine combine) {
    for (int64_t i = 0; i < count; ++i)
        inout[i] = FromFloat(combine(ToFloat(inout[i]), ToFloat(in[i])));
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void reduce_16_op(uint16_t* inout, const uint16_t* in, int64_t count, ddp_op op) {
    switch (op) {
    case DDP_OP_SUM:
        return reduce_16<ToFloat, FromFloat>(inout, in, count, [](float a, float b) { return a + b; });
    case DDP_OP_PROD:
        return reduce_16<ToFloat, FromFloat>(inout, in, count, [](float a, float b) { return a * b; });
    case DDP_OP_MIN:
        return reduce_16<ToFloat, FromFloat>(inout, in, count, [](float a, float b) { return std::min(a, b); });
    case DDP_OP_MAX:
        return reduce_16<ToFloat, FromFloat>(inout, in, count, [](float a, float b) { return std::max(a, b); });
    default:
        fail(DDP_ERR_INTERNAL, "reduce_half_into called with AVG");
    }
}

template <typename T>
void divide_typed(void* dst, const void* src, int64_t count, double divisor) {
    auto* out = static_cast<T*>(dst);
    const auto* values = static_cast<const T*>(src);
    const T typed_divisor = static_cast<T>(divisor);
    for (int64_t i = 0; i < count; ++i) out[i] = values[i]  / typed_divisor;
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void divide_16(void* dst, const void* src, int64_t count, double divisor) {
    auto* out = static_cast<uint16_t*>(dst);
    const auto* values = static_cast<const uint16_t*>(src);
    const float typed_divisor = static_cast<float>(divisor);
    for (int64_t i = 0; i < count; ++i) out[i] = FromFloat(ToFloat(values[i])  / typed_divisor);
}

}  // namespace

void reduce_half_into(uint16_t* inout, const uint16_t* in, int64_t count, ddp_dtype dtype,
                      ddp_op op) {
    if (dtype == DDP_DTYPE_F16)
        reduce_16_op<f16_to_float, float_to_f16>(inout, in, count, op);
    else
        reduce_16_op<bf16_to_float, float_to_bf16>(inout, in, count, op);
}

void divide_copy(void* dst, const void* src, int64_t count, ddp_dtype dtype, double divisor) {
    switch (dtype) {
    case DDP_DTYPE_F32: return divide_typed<float>(dst, src, count, divisor);
    case DDP_DTYPE_F64: return divide_typed<double>(dst, src, count, divisor);
    case DDP_DTYPE_F16: return divide_16<f16_to_float, float_to_f16>(dst, src, count, divisor);
    case DDP_DTYPE_BF16: return divide_16<bf16_to_float, float_to_bf16>(dst, src, count, divisor);
    default: fail(DDP_ERR_INTERNAL, "divide_copy called with an integer dtype");
    }
}

}  // namespace ddp
