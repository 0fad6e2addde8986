#include "core/startup.hpp"

#include <memory>
#include <optional>
#include <string>

#include "backend/factory.hpp"
#include "backend/nccl/nccl_backend.hpp"
#include "control/startup.hpp"
#include "core/settings.hpp"
#include "core/trace_calls.hpp"
#include "device/cuda/cuda.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

// After a failed start, how long a rank waits for its peers to fail too.
constexpr double failed_start_wait_s = 10;

std::unique_ptr<Communicator> started_world(const ddp_init_options& opts) {
    // A rank with a bad option or environment still starts the backend,
    // so that every rank's ddp_init fails together (see Settings).
    std::optional<Error> invalid;
    Settings settings;
    try {
        settings = resolve_settings(opts);
    } catch (const Error& error) {
        invalid = error;
        settings.backend = fallback_backend(opts);
    }
    std::unique_ptr<Backend> backend = make_backend(settings.backend, opts.mpi_comm_fortran);
    cuda::GpuAssignment gpu;
    try {
        fail_together(*backend, invalid, settings.timeout_s, DDP_ERR_MISMATCH,
                      "could not start libddp (their ddp_init returned DDP_ERR_INVALID_ARGUMENT naming the "
                      "option or environment variable), so no rank starts");
        set_log_threshold(settings.log_threshold);
        gpu = cuda::assign_gpu(backend->local_rank());
        if (settings.backend == DDP_BACKEND_NCCL) backend = make_nccl_backend(backend, gpu, settings.timeout_s);
    } catch (const Error&) {
        backend->finalize(all_reach(*backend, failed_start_wait_s));
        throw;
    }
    auto world = std::make_unique<Communicator>(std::move(backend), settings, std::move(gpu));
    if (!settings.timeline_path.empty()) {  // DDP_TIMELINE: every rank starts it here, together
        try {
            start_timeline(*world, settings.timeline_path);
        } catch (const Error& error) {
            world->finalize();
            fail(error.status(), "DDP_TIMELINE: " + std::string(error.what()));
        }
    }
    const Backend& started = world->backend();
    log_line(started.rank(), started.size(), DDP_LOG_DEBUG,
             std::string("initialized backend ") + started.name() + ", local rank " +
                 std::to_string(started.local_rank()) + " of " + std::to_string(started.local_size()) +
                 ", device " + std::to_string(world->device()));
    return world;
}

}  // namespace

CommHandle& start_world(const ddp_init_options& opts) {
    return add_world([&] { return started_world(opts); });
}

}  // namespace ddp
