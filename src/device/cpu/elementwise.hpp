// The element-wise arithmetic libddp does itself on host memory rather than
// through MPI: reductions MPI cannot do as libddp defines them
// (16-bit floats, MIN/MAX that propagate NaN) and the division that turns
// SUM into AVG. Pointers may be unaligned: tensors may start at any byte.
#pragma once

#include <cstdint>

#include "ddp/ddp.h"

namespace ddp {

/// inout[i] = inout[i] (op) in[i] for a floating dtype; op is SUM, PROD,
/// MIN or MAX. f16 and bf16 compute in single precision and round to
/// nearest even. MIN and MAX return NaN when either operand is NaN.
void reduce_into(void* inout, const void* in, int64_t count, ddp_dtype dtype, ddp_op op);

/// dst[i] = src[i] / divisor (AVG from SUM) for a floating dtype; dst may equal src.
void divide_copy(void* dst, const void* src, int64_t count, ddp_dtype dtype, double divisor);

}  // namespace ddp
