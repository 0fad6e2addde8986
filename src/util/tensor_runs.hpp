// A list's tensors as the runs they form in memory: views of one flat
// buffer (a bucket, ComponentArrays, a destructured model) become one
// tensor, so a device plane makes one NCCL call where it would make many.
#pragma once

#include <span>
#include <vector>

#include "ddp/ddp.h"

namespace ddp {

/// The non-empty tensors of `tensors`, in list order, each merged with the
/// next while the next starts where it ends and has its dtype and device.
std::vector<ddp_tensor> merged_runs(std::span<const ddp_tensor> tensors);

}  // namespace ddp
