#include "util/dtype.hpp"

#include <cstdio>

namespace ddp {

bool is_floating(ddp_dtype dtype) {
    return dtype == DDP_DTYPE_F16 || dtype == DDP_DTYPE_BF16 || dtype == DDP_DTYPE_F32 ||
           dtype == DDP_DTYPE_F64;
}

std::string dtype_name(int value) {
    switch (value) {
    case DDP_DTYPE_I8: return "i8";
    case DDP_DTYPE_I32: return "i32";
    case DDP_DTYPE_I64: return "i64";
    case DDP_DTYPE_U8: return "u8";
    case DDP_DTYPE_F16: return "f16";
    case DDP_DTYPE_F32: return "f32";
    case DDP_DTYPE_F64: return "f64";
    case DDP_DTYPE_BF16: return "bf16";
    default: {
        char buffer[32];
        snprintf(buffer, sizeof buffer, "dtype 0x%x", static_cast<unsigned>(value));
        return buffer;
    }
    }
}

std::string device_type_name(int value) {
    switch (value) {
    case DDP_DEVICE_CPU: return "cpu";
    case DDP_DEVICE_CUDA: return "cuda";
    case DDP_DEVICE_CUDA_HOST: return "cuda_host";
    case DDP_DEVICE_ROCM: return "rocm";
    case DDP_DEVICE_CUDA_MANAGED: return "cuda_managed";
    default: return "device type " + std::to_string(value);
    }
}

bool is_valid_op(int value) { return value >= DDP_OP_SUM && value <= DDP_OP_PROD; }

std::string op_name(int value) {
    switch (value) {
    case DDP_OP_SUM: return "SUM";
    case DDP_OP_AVG: return "AVG";
    case DDP_OP_MIN: return "MIN";
    case DDP_OP_MAX: return "MAX";
    case DDP_OP_PROD: return "PROD";
    default: return "op " + std::to_string(value);
    }
}

}  // namespace ddp
