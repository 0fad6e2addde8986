// The mpi host plane: moves tensors with MPI's non-blocking collectives
// (MPI_Iallreduce, MPI_Ibcast, ...) and, for small allreduces, point-to-point
// recursive doubling, so that the control plane can hold every operation to
// a deadline: a blocking MPI call waits for ever on a peer that died.
#pragma once

#include <memory>

#include "planes/host_plane.hpp"
#include "planes/mpi/data_comm.hpp"

namespace ddp {

/// A host plane over `data`, which outlives it.
std::unique_ptr<HostPlane> make_mpi_plane(MpiDataComm& data);

}  // namespace ddp
