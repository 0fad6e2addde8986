// The shared-memory host plane: the ranks of a communicator that all share
// one node move and reduce host buffers through one POSIX shared-memory
// segment instead of MPI (DeepSpeed's and oneCCL's CPU shm allreduce,
// NCCL's SHM transport). It stands in front of the transport's planes in
// the communicator's priority list (planes/planes_in_front.cpp) and runs the steps where it measured
// faster; see docs/shm.md.
#pragma once

#include <memory>

#include "control/channel.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

/// Sets the plane up collectively over `channel` (every rank of it calls
/// this): nullptr on every rank when it does not apply (one rank, ranks on
/// several nodes, `enabled` false on some rank: DDP_SHM not 1) or when setting
/// it up failed on any rank (said at debug log level). Waits for peers
/// until `deadline`; past it, it throws DDP_ERR_TIMEOUT.
std::unique_ptr<HostPlane> make_shm_plane(ControlChannel& channel, bool enabled, Clock::time_point deadline);

}  // namespace ddp
