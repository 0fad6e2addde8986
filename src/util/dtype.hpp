// Facts about ddp_dtype and ddp_op values: validity, sizes, names.
#pragma once

#include <cstddef>
#include <string>

#include "ddp/ddp.h"

namespace ddp {

bool is_valid_dtype(int value);
/// A validated tensor's dtype (the struct holds it as int32_t).
inline ddp_dtype dtype_of(const ddp_tensor& tensor) { return static_cast<ddp_dtype>(tensor.dtype); }
bool is_floating(ddp_dtype dtype);
size_t element_size(ddp_dtype dtype);
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
