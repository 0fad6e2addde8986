// What a backend must provide: the raw collectives on one contiguous buffer.
// Tensor lists, fusion and agreement are built on top of this, once, in
// collectives.cpp and agreement.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ddp/ddp.h"

namespace ddp {

using Clock = std::chrono::steady_clock;

class Transport {
public:
    virtual ~Transport() = default;

    virtual const char* name() const = 0;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual int local_rank() const = 0;
    virtual int local_size() const = 0;
    /// Whether a background thread may call this transport (MPI thread level).
    virtual bool allows_background_thread() const = 0;

    /// In-place allreduce; op is SUM, PROD, MIN or MAX (AVG is done above).
    virtual void allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) = 0;
    /// In-place reduce into root's buffer; other ranks' buffers are unchanged.
    virtual void reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) = 0;
    virtual void broadcast(void* data, int64_t bytes, int root) = 0;

    /// Element-wise maximum of `values` across ranks, waiting for the peers
    /// no later than `deadline`; throws DDP_ERR_TIMEOUT past it. This is the
    /// first call of every collective, so it is where a missing rank shows.
    virtual void max_u64(std::span<uint64_t> values, Clock::time_point deadline) = 0;
    /// Every rank's `words`, indexed by rank.
    virtual std::vector<std::vector<uint64_t>> allgather_u64(std::span<const uint64_t> words) = 0;

    /// True after a timeout: a collective was abandoned, so no other may start.
    virtual bool broken() const = 0;

    /// Releases the backend (MPI_Finalize when libddp initialized MPI).
    virtual void finalize() = 0;
};

std::unique_ptr<Transport> make_self_transport();

/// Starts or adopts MPI; mpi_comm_fortran is DDP_NO_MPI_COMM for the world.
/// Throws DDP_ERR_UNSUPPORTED when libddp was built without MPI.
std::unique_ptr<Transport> make_mpi_transport(int64_t mpi_comm_fortran);

/// Whether an MPI launcher started this process, or MPI is already running.
bool mpi_launch_detected();

/// Whether the environment shows an MPI launcher (mpirun, Hydra, PMIx).
bool launched_by_mpi_launcher();

}  // namespace ddp
