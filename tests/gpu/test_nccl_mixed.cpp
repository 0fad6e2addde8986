// ddp_init_local with devices under mpirun: each thread of each process sets
// up its NCCL communicator over the group's channel, so that all P x n ranks
// are one NCCL communicator, each with its own rank and process 0's unique
// id. Run under mpirun -np 2 against the NCCL stand-in (nccl_standin.c), so
// no GPU is used: it shows the set-up's numbers and id, not data on a GPU.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/control_plane.hpp"
#include "planes/nccl/nccl_comm.hpp"
#include "planes/nccl/nccl_library.hpp"
#include "planes/planes_in_front.hpp"
#include "planes/transport.hpp"
#include "util/error.hpp"
#include "nccl_comms_on_threads.hpp"

namespace {

using namespace ddp;

constexpr int threads = 2;

void* standin() { return dlopen(std::getenv("STANDIN"), RTLD_NOW | RTLD_NOLOAD); }

TEST(NcclAcrossProcessesAndThreads, EveryThreadJoinsOneCommunicatorOfEveryRankWithProcessZerosId) {
    setenv("DDP_NCCL_LIBRARY", std::getenv("STANDIN"), 1);
    const NcclLibrary& nccl = nccl_library();
    std::unique_ptr<Transport> processes = make_mpi_transport(DDP_NO_MPI_COMM, MpiEnds::at_exit);
    const int process = processes->channel().rank(), count = processes->channel().size();
    // Process 0 draws ids first, so that its id differs from the one any
    // other process would draw for itself (the stand-in numbers them).
    if (process == 0) {
        auto draw = reinterpret_cast<ncclResult_t (*)(ncclUniqueId*)>(dlsym(standin(), "ncclGetUniqueId"));
        ASSERT_NE(draw, nullptr);
        ncclUniqueId id;
        for (int i = 0; i < 3; ++i) draw(&id);
    }
    std::vector<std::unique_ptr<Transport>> transports =
        make_mixed_transports(std::move(processes), {}, PlaneSwitches{}, threads);
    std::vector<std::unique_ptr<NcclComm>> comms =
        nccl_comms_on_threads(nccl, transports, 20, [](int, NcclComm&, CallContext&) {});
    const auto* sizes = static_cast<const int*>(dlsym(standin(), "standin_init_size"));
    const auto* ids = static_cast<const unsigned char*>(dlsym(standin(), "standin_init_id"));
    ASSERT_NE(sizes, nullptr);
    ASSERT_NE(ids, nullptr);
    for (int thread = 0; thread < threads; ++thread) {
        const int rank = process * threads + thread;
        EXPECT_NE(comms[static_cast<size_t>(thread)], nullptr);
        EXPECT_EQ(sizes[rank], count * threads) << "rank " << rank;
        EXPECT_EQ(ids[rank], 7 + 3) << "rank " << rank << " has process 0's id (its 4th), not one of its own";
    }
    comms.clear();
    {
        std::vector<std::jthread> ending;
        for (auto& transport : transports) ending.emplace_back([&transport] { transport->finalize(true); });
    }
}

}  // namespace
