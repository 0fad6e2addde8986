// The values the device test (test_device_collectives.cpp) puts on each
// rank and expects back, and their bytes in each dtype: host code only, so
// that they are tested without a GPU (test_device_values.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ddp/ddp.h"

inline size_t element_size(ddp_dtype dtype) { return (static_cast<unsigned>(dtype) & 0xff) / 8; }

// Small integers: exact in every dtype, so every op's result is exact too.
inline double value_of(int on_rank, size_t tensor, size_t element) {
    return static_cast<double>((on_rank + 1) * ((tensor + element) % 5 + 1));
}

// The host representation of `value` in `dtype` (f16/bf16 by their bits).
inline void store(std::vector<std::byte>& bytes, size_t index, ddp_dtype dtype, double value) {
    std::byte* at = bytes.data() + index * element_size(dtype);
    switch (dtype) {
    case DDP_DTYPE_F32: { const float v = static_cast<float>(value); std::memcpy(at, &v, 4); break; }
    case DDP_DTYPE_F64: std::memcpy(at, &value, 8); break;
    case DDP_DTYPE_I32: { const int32_t v = static_cast<int32_t>(value); std::memcpy(at, &v, 4); break; }
    case DDP_DTYPE_I64: { const int64_t v = static_cast<int64_t>(value); std::memcpy(at, &v, 8); break; }
    case DDP_DTYPE_I8:
    case DDP_DTYPE_U8: {  // products wrap modulo 256, as in 8-bit arithmetic (an out-of-range double cast is UB)
        const auto v = static_cast<uint8_t>(static_cast<uint64_t>(static_cast<int64_t>(value)) & 0xff);
        std::memcpy(at, &v, 1);
        break;
    }
    case DDP_DTYPE_BF16: {  // rounded to nearest even, as NCCL and the CPU path store a result
        const float v = static_cast<float>(value);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t half = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
        std::memcpy(at, &half, 2);
        break;
    }
    case DDP_DTYPE_F16: {  // exact for the small values used here
        const float v = static_cast<float>(value);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint32_t sign = (bits >> 16) & 0x8000, exponent = (bits >> 23) & 0xff, mantissa = bits & 0x7fffff;
        const uint16_t half = v == 0 ? static_cast<uint16_t>(sign)
                                     : static_cast<uint16_t>(sign | ((exponent - 112) << 10) | (mantissa >> 13));
        std::memcpy(at, &half, 2);
        break;
    }
    }
}

/// `op` over the values of `ranks` ranks, as a double (integer products wrap as in the dtype when stored).
inline double expected_value(ddp_op op, int ranks, size_t tensor, size_t element) {
    double result = value_of(0, tensor, element);
    for (int r = 1; r < ranks; ++r) {
        const double v = value_of(r, tensor, element);
        switch (op) {
        case DDP_OP_SUM:
        case DDP_OP_AVG: result += v; break;
        case DDP_OP_MIN: result = std::min(result, v); break;
        case DDP_OP_MAX: result = std::max(result, v); break;
        case DDP_OP_PROD: result *= v; break;
        }
    }
    return op == DDP_OP_AVG ? result / ranks : result;
}

