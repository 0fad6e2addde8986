#include "device/cpu/elementwise.hpp"

#include <cstring>

#include "device/cpu/element_rules.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

// Element access through memcpy: defined for any alignment, and compiled to
// plain loads and stores where the target allows unaligned access.
template <typename T>
T load(const void* base, int64_t i) {
    T value;
    std::memcpy(&value, static_cast<const char*>(base) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return value;
}

template <typename T>
void store(void* base, int64_t i, T value) {
    std::memcpy(static_cast<char*>(base) + i * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

template <typename Format, typename Combine>
void reduce_with(void* inout, const void* in, int64_t count, Combine combine) {
    using Stored = typename Format::Stored;
    for (int64_t i = 0; i < count; ++i) {
        const auto result = combine(Format::to(load<Stored>(inout, i)), Format::to(load<Stored>(in, i)));
        store<Stored>(inout, i, Format::from(result));
    }
}

template <typename Format>
void reduce_format(void* inout, const void* in, int64_t count, ddp_op op) {
    switch (op) {
    case DDP_OP_SUM: return reduce_with<Format>(inout, in, count, [](auto a, auto b) { return a + b; });
    case DDP_OP_PROD: return reduce_with<Format>(inout, in, count, [](auto a, auto b) { return a * b; });
    case DDP_OP_MIN: return reduce_with<Format>(inout, in, count, [](auto a, auto b) { return nan_min(a, b); });
    case DDP_OP_MAX: return reduce_with<Format>(inout, in, count, [](auto a, auto b) { return nan_max(a, b); });
    default: fail(DDP_ERR_INTERNAL, "reduce_into called with AVG");
    }
}

template <typename Format, typename Compute>
void divide_format(void* dst, const void* src, int64_t count, double divisor) {
    using Stored = typename Format::Stored;
    const auto typed_divisor = static_cast<Compute>(divisor);
    for (int64_t i = 0; i < count; ++i)
        store<Stored>(dst, i, Format::from(Format::to(load<Stored>(src, i)) / typed_divisor));
}

}  // namespace

void reduce_into(void* inout, const void* in, int64_t count, ddp_dtype dtype, ddp_op op) {
    switch (dtype) {
    case DDP_DTYPE_F32: return reduce_format<Plain<float>>(inout, in, count, op);
    case DDP_DTYPE_F64: return reduce_format<Plain<double>>(inout, in, count, op);
    case DDP_DTYPE_F16: return reduce_format<F16>(inout, in, count, op);
    case DDP_DTYPE_BF16: return reduce_format<BF16>(inout, in, count, op);
    default: fail(DDP_ERR_INTERNAL, "reduce_into called with an integer dtype");
    }
}

void divide_copy(void* dst, const void* src, int64_t count, ddp_dtype dtype, double divisor) {
    switch (dtype) {
    case DDP_DTYPE_F32: return divide_format<Plain<float>, float>(dst, src, count, divisor);
    case DDP_DTYPE_F64: return divide_format<Plain<double>, double>(dst, src, count, divisor);
    case DDP_DTYPE_F16: return divide_format<F16, float>(dst, src, count, divisor);
    case DDP_DTYPE_BF16: return divide_format<BF16, float>(dst, src, count, divisor);
    default: fail(DDP_ERR_INTERNAL, "divide_copy called with an integer dtype");
    }
}

}  // namespace ddp
