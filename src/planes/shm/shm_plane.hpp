// The shared-memory host plane: the ranks of a communicator that all share
// one node move and reduce host buffers through one POSIX shared-memory
// segment instead of MPI (DeepSpeed's and oneCCL's CPU shm allreduce,
// NCCL's SHM transport). It stands in front of the transport's planes in
// the communicator's priority list (planes/planes_in_front.cpp) and runs the steps where it measured
// faster; see docs/shm.md.
#pragma once

#include <memory>
#include <optional>

#include "control/channel.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

/// What the user asked of the plane (docs/shm.md).
struct ShmRequest {
    /// DDP_SHM=1/0: on or off; unset: on where every rank of the node has a
    /// CPU of its own (polled flags need the peers running at the same moment).
    std::optional<bool> on;
    /// DDP_SHM_STREAM=1/0: streaming copies into the segment always or never;
    /// unset: where a probe finds the ranks' cores far apart.
    std::optional<bool> stream;
};

/// Sets the plane up collectively over `channel` (every rank of it calls
/// this): nullptr on every rank when it does not apply (one rank, ranks on
/// several nodes, turned off or more ranks than CPUs on some rank) or when
/// setting it up failed on any rank (said at debug log level). Waits for
/// peers until `deadline`; past it, it throws DDP_ERR_TIMEOUT.
std::unique_ptr<HostPlane> make_shm_plane(ControlChannel& channel, ShmRequest request, Clock::time_point deadline);

}  // namespace ddp
