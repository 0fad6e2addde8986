// A transport is what a backend brings up over a set of ranks: one control
// channel and the host data planes that run over it (mpi: MPI's point to
// point and collectives; self: one process). Device planes (nccl) are
// added beside a transport (planes/device_plane.hpp). A new transport is a
// new folder under src/planes/ with a make_* function here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "control/channel.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

struct PlaneSwitches;

class Transport {
public:
    virtual ~Transport() = default;
    virtual const char* name() const = 0;
    virtual ControlChannel& channel() = 0;
    /// The transport's own host data planes, best first.
    virtual std::vector<HostPlane*> host_planes() = 0;
    /// Whether its ranks are threads (ddp_init_local, under mpirun or not,
    /// and their splits): a process's ranks may then share a GPU, and one
    /// thread may drive them all.
    virtual bool ranks_are_threads() const { return false; }
    /// The ranks passing the same `color` (>= 0), ranked by `key` then by
    /// rank, as a new transport with channels of its own; nullptr on a rank
    /// passing a negative color. `every_rank` is each rank's (color, key),
    /// already exchanged (empty where the caller knows the transport
    /// exchanges them itself, as MPI_Comm_split does). Collective over this transport's ranks; called
    /// once agreement has seen every rank in the call, so that the
    /// transport's own blocking steps (MPI_Comm_split) find every peer
    /// there. What can be polled is held to `deadline`.
    virtual std::unique_ptr<Transport> split(int color, int key, std::span<const std::pair<int, int>> every_rank,
                                             Clock::time_point deadline) = 0;
    /// Releases the transport. With `peers_present` false nothing collective
    /// is called (MPI is left running so the process can still exit).
    virtual void finalize(bool peers_present) = 0;
};

std::unique_ptr<Transport> make_self_transport();

/// Ranks 0..size-1 of one group whose ranks are threads of this process
/// (ddp_init_local): one transport per rank, each used by its own thread.
/// `first_rank`: where the threads are part of a wider group (processes x
/// threads), the number that group gives rank 0, as abort notices name
/// their senders; 0 otherwise.
std::vector<std::unique_ptr<Transport>> make_local_transports(int size, int first_rank = 0);

/// The `threads` ranks of this process in one group of processes x threads
/// (ddp_init_local under an MPI launcher): rank process x threads + i is
/// thread i of process `processes`' rank. Threads meet in this process's
/// memory, one thread of each process carries their part to the other
/// processes over `processes` (an mpi transport at MPI_THREAD_MULTIPLE)
/// and `in_front`, the planes in front of it made with `switches`
/// (make_planes_between_processes). Every process must pass the same `threads` (the
/// caller checks).
std::vector<std::unique_ptr<Transport>> make_mixed_transports(std::unique_ptr<Transport> processes,
                                                              std::vector<std::unique_ptr<HostPlane>> in_front,
                                                              const PlaneSwitches& switches, int threads);

/// Starts or adopts MPI; mpi_comm_fortran is DDP_NO_MPI_COMM for the world.
/// Throws DDP_ERR_UNSUPPORTED when libddp was built without MPI.
/// `mpi_ends`: when MPI ends where this transport started it: at its
/// finalize (the world), or at the process's exit (a group of processes x
/// threads, beside which other groups or a world may still use MPI).
enum class MpiEnds { at_finalize, at_exit };
std::unique_ptr<Transport> make_mpi_transport(int64_t mpi_comm_fortran, MpiEnds mpi_ends = MpiEnds::at_finalize);

/// Whether an MPI launcher started this process, or MPI is already running.
bool mpi_launch_detected();

/// Whether the environment shows an MPI launcher (mpirun, Hydra, PMIx).
bool launched_by_mpi_launcher();

}  // namespace ddp
