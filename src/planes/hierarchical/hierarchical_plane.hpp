// The hierarchical host plane (Horovod's hierarchical allreduce, oneCCL's
// 2D): for a communicator whose ranks span several nodes with several ranks
// on some node, an allreduce is a reduce inside each node onto its leader,
// an allreduce among the leaders only, and a broadcast inside each node.
// Only one rank per node then sends the bytes between nodes, instead of
// every rank taking part in one flat allreduce over the network.
#pragma once

#include <memory>

#include "planes/hierarchical/capabilities.hpp"
#include "planes/host_plane.hpp"
#include "planes/shm/shm_plane.hpp"
#include "planes/transport.hpp"

namespace ddp {

/// The hierarchical plane over `transport`'s ranks, or nullptr where it has
/// nothing to gain (one node, or one rank per node). Its node stages go
/// through two shared-memory planes over the node's ranks where `shm`
/// (DDP_SHM) lets them and they can be set up, else through MPI's node
/// communicators; decided per node, said at debug log level and in the
/// plane's name ("hierarchical/shm", "hierarchical/mpi").
/// Collective over the transport's ranks (it splits the transport by node
/// and into the node leaders); `deadline` bounds the exchanges that decide.
std::unique_ptr<HostPlane> make_hierarchical_plane(Transport& transport, ShmRequest shm, Clock::time_point deadline);

}  // namespace ddp
