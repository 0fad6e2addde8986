// The MPI transport: Open MPI (or any MPI-3 library) on host buffers. It
// starts MPI (or adopts a running one) and brings up, on two private
// duplicates of the caller's communicator, the mpi control channel
// (mpi_channel.cpp) and the mpi host plane (mpi_plane.cpp): data travels on
// one, control messages on the other, so that they never meet.
#include <mpi.h>

#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "planes/mpi/data_comm.hpp"
#include "planes/mpi/mpi_channel.hpp"
#include "planes/mpi/mpi_check.hpp"
#include "planes/mpi/mpi_plane.hpp"
#include "planes/mpi/mpi_tuning.hpp"
#include "planes/transport.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

/// Channels whose receives (and abandoned operations) MPI may still write
/// into, kept until the process exits.
void keep_until_exit(std::unique_ptr<MpiChannel> channel) {
    static std::mutex mutex;
    static std::vector<std::unique_ptr<MpiChannel>> kept;
    std::lock_guard lock(mutex);
    kept.push_back(std::move(channel));
}

class MpiTransport final : public Transport {
public:
    /// The world: starts MPI (or adopts a running one, and the caller's
    /// communicator) and duplicates the base communicator twice.
    MpiTransport(int64_t mpi_comm_fortran, MpiEnds mpi_ends) : mpi_ends_(mpi_ends) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (finalized)
            fail(DDP_ERR_ALREADY_INITIALIZED, "MPI was already finalized in this process and cannot start again");
        if (mpi_comm_fortran != DDP_NO_MPI_COMM && !initialized)
            fail(DDP_ERR_INVALID_ARGUMENT, "mpi_comm_fortran names a communicator but MPI is not initialized");
        if (initialized) {
            check(MPI_Query_thread(&thread_level_), "MPI_Query_thread");
        } else {
            check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_), "MPI_Init_thread");
            owns_mpi_ = true;
            starter_ = std::this_thread::get_id();
        }
        choose_nonblocking_allreduce_algorithm(thread_level_);
        MPI_Comm base = MPI_COMM_WORLD;
        if (mpi_comm_fortran != DDP_NO_MPI_COMM) {
            base = MPI_Comm_f2c(static_cast<MPI_Fint>(mpi_comm_fortran));
            if (base == MPI_COMM_NULL || base == nullptr)
                fail(DDP_ERR_INVALID_ARGUMENT, "mpi_comm_fortran " + std::to_string(mpi_comm_fortran) +
                                                   " is not a valid MPI communicator handle");
        }
        // Private duplicates keep libddp's traffic apart from the caller's.
        check(MPI_Comm_dup(base, &data_.comm), "MPI_Comm_dup");
        MPI_Comm control = MPI_COMM_NULL;
        check(MPI_Comm_dup(base, &control), "MPI_Comm_dup");
        set_up(control);
    }

    /// A sub-communicator over `comm` (from MPI_Comm_split, now this
    /// transport's data communicator), with a control channel of its own.
    /// MPI stays the world's to finalize.
    MpiTransport(MPI_Comm comm, int thread_level) : thread_level_(thread_level) {
        data_.comm = comm;
        MPI_Comm control = MPI_COMM_NULL;
        check(MPI_Comm_dup(comm, &control), "MPI_Comm_dup");
        set_up(control);
    }

    ~MpiTransport() override {
        try {
            finalize(false);
        } catch (const Error&) {
            // Destructors must not throw; finalize() reports errors when called directly.
        }
        // Left with peers absent, the channel's receives stay posted, and a
        // late message would land in it: where MPI outlives this transport
        // (the caller's MPI, a group of threads started again), it is kept.
        if (!freed_) keep_until_exit(std::move(channel_));
    }

    const char* name() const override { return "mpi"; }
    ControlChannel& channel() override { return *channel_; }
    std::vector<HostPlane*> host_planes() override { return {plane_.get()}; }

    std::unique_ptr<Transport> split(int color, int key, std::span<const std::pair<int, int>>,
                                     Clock::time_point) override {
        MPI_Comm sub = MPI_COMM_NULL;
        check(MPI_Comm_split(data_.comm, color >= 0 ? color : MPI_UNDEFINED, key, &sub), "MPI_Comm_split");
        if (sub == MPI_COMM_NULL) return nullptr;
        try {
            return std::make_unique<MpiTransport>(sub, thread_level_);
        } catch (const Error&) {
            MPI_Comm_free(&sub);
            throw;
        }
    }

    void finalize(bool peers_present) override {
        if (channel_) channel_->finalize(peers_present);
        if (data_.comm == MPI_COMM_NULL) return;
        if (!peers_present) {
            // A peer is gone or stuck: anything collective could wait for
            // ever, so MPI is left as it is and the process may exit.
            data_.comm = MPI_COMM_NULL;
            return;
        }
        data_.ops.reset();
        // A communicator with an operation a timeout abandoned is not freed:
        // freeing it could wait for that operation.
        freed_ = !channel_->abandoned_any();
        if (freed_) check(MPI_Comm_free(&data_.comm), "MPI_Comm_free");
        data_.comm = MPI_COMM_NULL;
        if (!owns_mpi_) return;
        // MPI ends on the thread that started it (MPI's main thread), and
        // not while others may use it: else at the process's exit.
        if (mpi_ends_ == MpiEnds::at_finalize && std::this_thread::get_id() == starter_)
            check(MPI_Finalize(), "MPI_Finalize");
        else
            std::atexit([] {
                int finalized = 0;
                MPI_Finalized(&finalized);
                if (!finalized) MPI_Finalize();
            });
    }

private:
    /// What both constructors do once the data communicator and `control`
    /// exist: errors returned, rank and size, operations, the channel and
    /// the plane.
    void set_up(MPI_Comm control) {
        check(MPI_Comm_set_errhandler(data_.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        check(MPI_Comm_rank(data_.comm, &data_.rank), "MPI_Comm_rank");
        check(MPI_Comm_size(data_.comm, &data_.size), "MPI_Comm_size");
        data_.ops = std::make_unique<MpiOps>();
        channel_ = make_mpi_channel(data_, control, thread_level_);
        plane_ = make_mpi_plane(data_);
    }

    MpiDataComm data_;
    int thread_level_ = MPI_THREAD_SINGLE;
    MpiEnds mpi_ends_ = MpiEnds::at_finalize;
    bool owns_mpi_ = false;
    std::thread::id starter_;  ///< the thread that started MPI, where this transport did
    bool freed_ = false;  ///< finalized with every peer present: the channel's receives are cancelled
    std::unique_ptr<MpiChannel> channel_;  // after data_: it uses it
    std::unique_ptr<HostPlane> plane_;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport(int64_t mpi_comm_fortran, MpiEnds mpi_ends) {
    return std::make_unique<MpiTransport>(mpi_comm_fortran, mpi_ends);
}

bool mpi_launch_detected() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized || launched_by_mpi_launcher();
}

}  // namespace ddp
