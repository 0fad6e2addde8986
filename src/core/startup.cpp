#include "core/startup.hpp"

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/startup.hpp"
#include "core/settings.hpp"
#include "core/trace_calls.hpp"
#include "device/cuda/cuda.hpp"
#include "planes/factory.hpp"
#include "planes/nccl/local_ranks.hpp"
#include "planes/nccl/nccl_plane.hpp"
#include "planes/planes_in_front.hpp"
#include "trace/timeline.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

// After a failed start, how long a rank waits for its peers to fail too.
constexpr double failed_start_wait_s = 10;

// Releases a transport whose start failed, with every peer present only
// where all of them fail too within failed_start_wait_s (so that MPI, which
// the transport may have started, still ends).
void end_failed_start(Transport& transport) {
    transport.finalize(all_reach(transport.channel(), failed_start_wait_s));
}

std::unique_ptr<Communicator> started_world(const ddp_init_options& opts) {
    // A rank with a bad option or environment still starts the transport,
    // so that every rank's ddp_init fails together (see Settings).
    std::optional<Error> invalid;
    Settings settings;
    try {
        settings = resolve_settings(opts);
    } catch (const Error& error) {
        invalid = error;
        settings.backend = fallback_backend(opts);
    }
    std::unique_ptr<Transport> transport = make_transport(settings.backend, opts.mpi_comm_fortran);
    std::unique_ptr<DevicePlane> device_plane;
    cuda::GpuAssignment gpu;
    try {
        fail_together(transport->channel(), invalid, settings.timeout_s, DDP_ERR_MISMATCH,
                      "could not start libddp (their ddp_init returned DDP_ERR_INVALID_ARGUMENT naming the "
                      "option or environment variable), so no rank starts");
        set_log_threshold(settings.log_threshold);
        gpu = cuda::assign_gpu(transport->channel().local_rank());
        if (settings.backend == DDP_BACKEND_NCCL)
            device_plane = make_nccl_plane(*transport, gpu, settings.timeout_s, nullptr);
    } catch (const Error&) {
        end_failed_start(*transport);
        throw;
    }
    auto world =
        std::make_unique<Communicator>(std::move(transport), std::move(device_plane), settings, std::move(gpu));
    if (!settings.timeline_path.empty()) {  // DDP_TIMELINE: every rank starts it here, together
        try {
            start_timeline(*world, settings.timeline_path);
        } catch (const Error& error) {
            world->finalize();
            fail(error.status(), "DDP_TIMELINE: " + std::string(error.what()));
        }
    }
    const ControlChannel& started = world->channel();
    log_line(started.rank(), started.size(), DDP_LOG_DEBUG,
             std::string("initialized backend ") + world->backend_name() + ", local rank " +
                 std::to_string(started.local_rank()) + " of " + std::to_string(started.local_size()) +
                 ", device " + std::to_string(world->device()));
    return world;
}

// Under an MPI launcher, this process's `size` threads in one group with
// every other process's: MPI starts whatever this process found wrong, so
// that every process fails together instead of leaving the others waiting.
std::vector<std::unique_ptr<Transport>> threads_of_every_process(int size, std::optional<Error> refused,
                                                                 double timeout_s,
                                                                 const PlaneSwitches& switches) {
    std::unique_ptr<Transport> processes = make_mpi_transport(DDP_NO_MPI_COMM, MpiEnds::at_exit);
    ControlChannel& channel = processes->channel();
    std::vector<std::unique_ptr<HostPlane>> in_front;
    try {
        if (!refused && !channel.allows_concurrent_calls())
            refused = Error(DDP_ERR_UNSUPPORTED, "ddp_init_local under an MPI launcher needs MPI_THREAD_MULTIPLE (its "
                                                 "threads share MPI), and MPI runs at a lower thread level");
        fail_together(channel, refused, timeout_s, DDP_ERR_MISMATCH,
                      "could not start their threads (their ddp_init_local returned the error naming why), so no "
                      "process starts");
        // Ranks are numbered process by process: every process starts as many.
        const uint64_t mine = static_cast<uint64_t>(size);
        const auto every_process = exchange_words(channel, std::span(&mine, 1), timeout_s);
        for (size_t process = 0; process < every_process.size(); ++process)
            if (every_process[process].at(0) != mine)
                fail(DDP_ERR_INVALID_ARGUMENT,
                     "ddp_init_local: n is " + std::to_string(size) + " in MPI rank " +
                         std::to_string(channel.rank()) + " but " + std::to_string(every_process[process].at(0)) +
                         " in MPI rank " + std::to_string(process) + ": every process must start as many ranks");
        // Between the processes, the planes their world would have in front of MPI.
        in_front = make_planes_between_processes(*processes, switches, deadline_after(timeout_s));
    } catch (const Error&) {
        end_failed_start(*processes);
        throw;
    }
    return make_mixed_transports(std::move(processes), std::move(in_front), switches, size);
}

}  // namespace

CommHandle& start_world(const ddp_init_options& opts) {
    return add_world([&] { return started_world(opts); });
}

std::vector<CommHandle*> start_local_group(const ddp_init_options& opts, int size, std::span<const int32_t> devices,
                                           const std::optional<Error>& invalid) {
    const bool across_processes = launched_by_mpi_launcher();
    if (invalid && !across_processes) throw *invalid;
    std::optional<Error> refused = invalid;
    Settings settings;
    try {
        settings = resolve_settings(opts);
    } catch (const Error& error) {
        if (!across_processes) throw;
        if (!refused) refused = error;
    }
    set_log_threshold(settings.log_threshold);
    // With devices and several ranks here, NCCL's ranks of this process
    // connect at set-up and meet before each launch (planes/nccl/local_ranks.hpp);
    // the variable is set before MPI or a thread of libddp's runs.
    const bool ranks_share_nccl_here = !devices.empty() && size > 1;
    const std::string connecting = ranks_share_nccl_here ? connect_nccl_ranks_at_set_up() : "";
    // Between processes, the planes the user allows (make_planes_between_processes).
    std::vector<std::unique_ptr<Transport>> transports =
        across_processes ? threads_of_every_process(size, refused, settings.timeout_s, settings.planes)
                         : make_local_transports(size);
    std::shared_ptr<LaunchGate> gate;
    if (ranks_share_nccl_here) {
        ControlChannel& channel = transports.front()->channel();
        log_line(channel.rank(), channel.size(), DDP_LOG_DEBUG, connecting);
        std::vector<int> ranks;
        for (const auto& transport : transports) ranks.push_back(transport->channel().rank());
        gate = std::make_shared<LaunchGate>(std::move(ranks));
    }
    // Between threads the in-process plane moves the data: no segment, no nodes.
    settings.planes.shm.on = false;
    settings.planes.hierarchical = false;
    // Messages and flight recorder files name the group: a process may hold several.
    static std::atomic<int> groups_started{0};
    const std::string name = "local group " + std::to_string(++groups_started);
    // So do DDP_TIMELINE's files: "trace.json" gives "trace.local_group_1.rank0.json".
    const std::string timeline_path =
        settings.timeline_path.empty() ? "" : trace::tagged_path(settings.timeline_path, trace::file_tag(name));
    // A communicator's start meets its peers (NCCL's set-up, the planes in
    // front decide together, DDP_TIMELINE starts together): one thread per
    // rank, as the group will run.
    std::vector<std::unique_ptr<Communicator>> started(static_cast<size_t>(size));
    std::vector<std::exception_ptr> failures(static_cast<size_t>(size));
    {
        std::vector<std::jthread> starters;
        for (size_t rank = 0; rank < started.size(); ++rank)
            starters.emplace_back([&, rank] {
                try {
                    // With devices, each rank's NCCL communicator, set up
                    // over the group's channel as across processes.
                    cuda::GpuAssignment gpu{-1, "the group from ddp_init_local was started without devices"};
                    std::unique_ptr<DevicePlane> device_plane;
                    if (!devices.empty()) {
                        gpu = cuda::named_gpu(devices[rank]);
                        device_plane = make_nccl_plane(*transports[rank], gpu, settings.timeout_s, gate);
                    }
                    started[rank] = std::make_unique<Communicator>(std::move(transports[rank]),
                                                                   std::move(device_plane), settings, gpu, name);
                    if (!timeline_path.empty()) start_timeline(*started[rank], timeline_path);
                } catch (...) {
                    failures[rank] = std::current_exception();
                    // A set-up that failed (make_nccl_plane fails on every rank
                    // together; a failure of one rank alone waits here up to
                    // failed_start_wait_s for peers that will not come): the rank
                    // releases its transport as a world's failed start does, so
                    // that MPI, where a group across processes started it, still ends.
                    if (Transport* transport = transports[rank].get()) end_failed_start(*transport);
                }
            });
    }
    // A failed start releases the ranks that started: their transports hold
    // nothing collective, and an NCCL set-up fails on every rank together
    // (make_nccl_plane), so no rank is left holding a communicator its peers lack.
    for (const std::exception_ptr& failure : failures)
        if (failure) std::rethrow_exception(failure);
    return add_local_group(std::move(started));
}

}  // namespace ddp
