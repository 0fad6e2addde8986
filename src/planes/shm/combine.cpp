#include "planes/shm/combine.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "device/cpu/element_rules.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp::shm {

namespace {

template <typename T>
T sum(T a, T b) {
    if constexpr (std::is_integral_v<T>)  // wraps, as MPI's C arithmetic does
        return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
    else
        return a + b;
}

template <typename T>
T product(T a, T b) {
    if constexpr (std::is_integral_v<T>)
        return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<std::make_unsigned_t<T>>(a) *
                                                                    static_cast<std::make_unsigned_t<T>>(b)));
    else
        return a * b;
}

// Elements through memcpy: segments and tensors may start at any byte.
template <typename Format, typename Op>
[[gnu::always_inline]] inline void loop(void* dst, const void* a, const void* b, int64_t count, Op op) {
    using Stored = typename Format::Stored;
    auto* out = static_cast<char*>(dst);
    const auto* left = static_cast<const char*>(a);
    const auto* right = static_cast<const char*>(b);
    constexpr auto size = static_cast<int64_t>(sizeof(Stored));
    // dst is a, b or apart from both: no element depends on another.
#pragma GCC ivdep
    for (int64_t i = 0; i < count; ++i) {
        Stored x, y;
        std::memcpy(&x, left + i * size, sizeof x);
        std::memcpy(&y, right + i * size, sizeof y);
        const Stored z = Format::from(op(Format::to(x), Format::to(y)));
        std::memcpy(out + i * size, &z, sizeof z);
    }
}

template <typename Format>
[[gnu::always_inline]] inline void by_op(void* dst, const void* a, const void* b, int64_t count, ddp_op op) {
    switch (op) {
    case DDP_OP_SUM: return loop<Format>(dst, a, b, count, [](auto x, auto y) { return sum(x, y); });
    case DDP_OP_PROD: return loop<Format>(dst, a, b, count, [](auto x, auto y) { return product(x, y); });
    case DDP_OP_MIN: return loop<Format>(dst, a, b, count, [](auto x, auto y) { return nan_min(x, y); });
    case DDP_OP_MAX: return loop<Format>(dst, a, b, count, [](auto x, auto y) { return nan_max(x, y); });
    default: fail(DDP_ERR_INTERNAL, "shm combine called with AVG");
    }
}

[[gnu::always_inline]] inline void combine_body(void* dst, const void* a, const void* b, int64_t count,
                                                ddp_dtype dtype, ddp_op op) {
    switch (dtype) {
    case DDP_DTYPE_I8: return by_op<Plain<int8_t>>(dst, a, b, count, op);
    case DDP_DTYPE_I32: return by_op<Plain<int32_t>>(dst, a, b, count, op);
    case DDP_DTYPE_I64: return by_op<Plain<int64_t>>(dst, a, b, count, op);
    case DDP_DTYPE_U8: return by_op<Plain<uint8_t>>(dst, a, b, count, op);
    case DDP_DTYPE_F32: return by_op<Plain<float>>(dst, a, b, count, op);
    case DDP_DTYPE_F64: return by_op<Plain<double>>(dst, a, b, count, op);
    case DDP_DTYPE_F16: return by_op<F16>(dst, a, b, count, op);
    case DDP_DTYPE_BF16: return by_op<BF16>(dst, a, b, count, op);
    }
    fail(DDP_ERR_INTERNAL, "shm combine called with an unknown dtype");
}

// One body, compiled per target. Chosen on the first call rather than by
// GCC's target_clones: its ifunc resolver runs while the loader relocates
// libddp, before ThreadSanitizer is set up, and crashes the TSan build.
[[gnu::target("avx512f")]] void combine_avx512(void* dst, const void* a, const void* b, int64_t count, ddp_dtype dtype,
                                               ddp_op op) {
    combine_body(dst, a, b, count, dtype, op);
}
[[gnu::target("avx2")]] void combine_avx2(void* dst, const void* a, const void* b, int64_t count, ddp_dtype dtype,
                                          ddp_op op) {
    combine_body(dst, a, b, count, dtype, op);
}
void combine_baseline(void* dst, const void* a, const void* b, int64_t count, ddp_dtype dtype, ddp_op op) {
    combine_body(dst, a, b, count, dtype, op);
}

using Combine = void (*)(void*, const void*, const void*, int64_t, ddp_dtype, ddp_op);

Combine best_for_this_cpu() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return combine_avx512;
    if (__builtin_cpu_supports("avx2")) return combine_avx2;
    return combine_baseline;
}

}  // namespace

void combine(void* dst, const void* a, const void* b, int64_t count, ddp_dtype dtype, ddp_op op) {
    static const Combine best = best_for_this_cpu();
    best(dst, a, b, count, dtype, op);
}

void combine_in_rank_order(void* dst, std::span<const std::byte* const> inputs, size_t offset, int64_t count,
                           ddp_dtype dtype, ddp_op op) {
    if (inputs.size() == 1) {
        std::memcpy(dst, inputs[0] + offset, static_cast<size_t>(count) * element_size(dtype));
        return;
    }
    combine(dst, inputs[0] + offset, inputs[1] + offset, count, dtype, op);
    for (size_t rank = 2; rank < inputs.size(); ++rank) combine(dst, dst, inputs[rank] + offset, count, dtype, op);
}

}  // namespace ddp::shm
