// The MPI communicator libddp's data travels on (a private duplicate of the
// caller's), with what every operation on it needs. The mpi plane moves
// tensors on it, and the control channel sends agreement's words on it too,
// so that a call's agreement and its data meet every peer in one order.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "planes/mpi/mpi_types.hpp"

namespace ddp {

struct MpiDataComm {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, size = 1;
    /// Made once MPI runs, freed before it is finalized.
    std::unique_ptr<MpiOps> ops;

    /// A tag for one point-to-point operation on `comm`. Every rank starts
    /// libddp's operations in one order, so equal tags name the same one;
    /// MPI's smallest allowed tag range (32768) is far more than are in flight.
    int next_tag() { return static_cast<int>(tag_counter_.fetch_add(1) % 32768); }

private:
    std::atomic<uint64_t> tag_counter_{0};
};

}  // namespace ddp
