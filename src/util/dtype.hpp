// Facts about ddp_dtype and ddp_op values: validity, sizes, names.
#pragma once

#include <cstddef>
#include <string>

#include "ddp/ddp.h"

namespace ddp {

// Inline: a list's checks call these once per tensor on every call.
inline bool is_valid_dtype(int value) {
    switch (value) {
    case DDP_DTYPE_I8: case DDP_DTYPE_I32: case DDP_DTYPE_I64: case DDP_DTYPE_U8:
    case DDP_DTYPE_F16: case DDP_DTYPE_F32: case DDP_DTYPE_F64: case DDP_DTYPE_BF16:
        return true;
    default:
        return false;
    }
}
/// A validated tensor's dtype (the struct holds it as int32_t).
inline ddp_dtype dtype_of(const ddp_tensor& tensor) { return static_cast<ddp_dtype>(tensor.dtype); }
bool is_floating(ddp_dtype dtype);
/// The low byte of every ddp_dtype is its width in bits (DLPack's layout).
inline size_t element_size(ddp_dtype dtype) { return (static_cast<unsigned>(dtype) & 0xffu) / 8; }
/// A validated tensor's size in bytes.
inline size_t byte_size(const ddp_tensor& tensor) {
    return static_cast<size_t>(tensor.count) * element_size(dtype_of(tensor));
}
/// "f32", "bf16", ...; "dtype 0x123" for values outside the enum.
std::string dtype_name(int value);

/// "cpu", "cuda", ...; "device type 7" for values outside the enum.
std::string device_type_name(int value);

bool is_valid_op(int value);
/// "SUM", "AVG", ...; "op 7" for values outside the enum.
std::string op_name(int value);

}  // namespace ddp
