// Conversions between single precision and the two 16-bit float formats
// (IEEE binary16 and bfloat16), rounding to nearest even. MPI has neither
// type, so libddp reduces them through these.
#pragma once

#include <bit>
#include <cstdint>

namespace ddp {

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t float_to_bf16(float f) {
    uint32_t bits = std::bit_cast<uint32_t>(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float f16_to_float(uint16_t h) {
    uint32_t sign = uint32_t{h & 0x8000u} << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0) return std::bit_cast<float>(sign);
        // Subnormal: mantissa * 2^-24, exact in single precision.
        float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
        return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t float_to_f16(float f) {
    uint32_t bits = std::bit_cast<uint32_t>(f);
    uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u;            // NaN
    if (magnitude >= 0x477ff000u) return sign | 0x7c00u;           // rounds to infinity
    if (magnitude < 0x38800000u) {                                 // subnormal or zero in f16
        // Scale so that the f16 subnormal unit becomes 1, then round to nearest even.
        float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // 2^24
        uint32_t units = static_cast<uint32_t>(scaled);
        float remainder = scaled - static_cast<float>(units);
        if (remainder > 0.5f || (remainder == 0.5f && (units & 1u))) ++units;
        return sign | static_cast<uint16_t>(units);
    }
    uint32_t rounding = 0xfffu + ((magnitude >> 13) & 1u);
    return sign | static_cast<uint16_t>((magnitude - 0x38000000u + rounding) >> 13);
}

}  // namespace ddp
