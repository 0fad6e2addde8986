// Giving each rank a GPU, as FluxMPI.Init does: round-robin by node-local rank.
#pragma once

namespace ddp {

/// Makes GPU `local_rank % gpu_count` current and returns its index, or -1
/// when libddp was built without CUDA or no GPU (or driver) is present.
int assign_gpu(int local_rank);

}  // namespace ddp
