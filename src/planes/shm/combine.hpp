// The shared-memory plane's reduction: dst = a (op) b element-wise, for
// every dtype and SUM, PROD, MIN or MAX, with the rules of the mpi plane
// (device/cpu/elementwise.hpp and MPI's built-in integer operations): f16
// and bf16 computed in single precision and rounded to nearest even after
// every combination, MIN and MAX returning NaN when either operand is NaN,
// integers wrapping. `a` is the left operand, as reduce_into's `inout`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ddp/ddp.h"

namespace ddp::shm {

/// dst may be a or b (exactly), not otherwise overlap them. The loop is
/// compiled for AVX-512, AVX2 and the baseline, chosen on the first call.
void combine(void* dst, const void* a, const void* b, int64_t count, ddp_dtype dtype, ddp_op op);

/// Every rank's input, `inputs[r] + offset` (count elements), combined in
/// rank order into dst, so that every rank computing it gets the same bits;
/// one input is copied. dst must not overlap the inputs.
void combine_in_rank_order(void* dst, std::span<const std::byte* const> inputs, size_t offset, int64_t count,
                           ddp_dtype dtype, ddp_op op);

}  // namespace ddp::shm
