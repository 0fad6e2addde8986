// libddp's element rules, shared by every place that combines elements on
// the CPU (device/cpu/elementwise.cpp for the mpi plane's user operations
// and AVG, planes/shm/combine.cpp): how a dtype's elements become numbers
// to compute with and back (f16 and bf16 in single precision, rounded to
// nearest even after every operation), and MIN/MAX that return NaN when
// either operand is NaN (MPI's and C's fmin/fmax would drop it).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "device/cpu/half.hpp"

namespace ddp {

/// A dtype computed as it is stored.
template <typename T>
struct Plain {
    using Stored = T;
    static T to(T v) { return v; }
    static T from(T v) { return v; }
};
struct F16 {
    using Stored = uint16_t;
    static float to(uint16_t v) { return f16_to_float(v); }
    static uint16_t from(float v) { return float_to_f16(v); }
};
struct BF16 {
    using Stored = uint16_t;
    static float to(uint16_t v) { return bf16_to_float(v); }
    static uint16_t from(float v) { return float_to_bf16(v); }
};

template <typename T>
T nan_min(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    return b < a ? b : a;
}

template <typename T>
T nan_max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    return a < b ? b : a;
}

}  // namespace ddp
