// What the shm plane implements: every data operation on every dtype, from
// 4 KiB up, and exchange from 1 MiB up. Measured (bench/allreduce_bench
// sizes, 2 ranks): at 4 KiB, the smallest size timed, this plane already beat
// the mpi plane's point-to-point path (median 0.74-1.47x a bare
// MPI_Allreduce against 0.22-0.78x); below it (2-4 KiB: smaller allreduces
// travel inside agreement's messages) the mpi plane keeps the step. An
// alltoall through it, which only moves bytes, took 2.7x MPI_Alltoall here
// at 64 KiB against the mpi plane's 1.4x, and 0.84-0.90x from 1 MiB to 64
// MiB against its 1.03-1.19x (bench/results/cpu-2026-11-27/core3-against-a1d59d0.txt).
#pragma once

#include "planes/capabilities.hpp"

namespace ddp {

inline constexpr Capability shm_capabilities[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter},
     .min_bytes = 4 * 1024},
    {.ops = {DataOp::exchange}, .min_bytes = 1024 * 1024},
};

}  // namespace ddp
