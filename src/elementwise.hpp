// The element-wise arithmetic libddp does itself rather than through the
// backend: reducing 16-bit floats (MPI has no such types) and the division
// that turns SUM into AVG.
#pragma once

#include <cstdint>

#include "ddp/ddp.h"

namespace ddp {

/// inout[i] = inout[i] (op) in[i] for f16 or bf16; op is SUM, PROD, MIN or MAX.
void reduce_half_into(uint16_t* inout, const uint16_t* in, int64_t count, ddp_dtype dtype,
                      ddp_op op);

/// dst[i] = src[i] / divisor (AVG from SUM) for a floating dtype; dst may equal src.
void divide_copy(void* dst, const void* src, int64_t count, ddp_dtype dtype, double divisor);

}  // namespace ddp
