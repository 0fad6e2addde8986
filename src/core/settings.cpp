#include "core/settings.hpp"

#include <cmath>

#include "control/hang_watchdog.hpp"
#include "planes/planes_in_front.hpp"
#include "planes/transport.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/timeout.hpp"

namespace ddp {

namespace {

ddp_backend backend_from_environment() {
    auto text = env_string("DDP_BACKEND");
    if (!text || *text == "auto") return DDP_BACKEND_AUTO;
    if (*text == "self") return DDP_BACKEND_SELF;
    if (*text == "mpi") return DDP_BACKEND_MPI;
    if (*text == "nccl") return DDP_BACKEND_NCCL;
    fail(DDP_ERR_INVALID_ARGUMENT, "DDP_BACKEND='" + *text + "' is not auto, self, mpi or nccl");
}

ddp_backend decide_auto(ddp_backend backend) {
    if (backend != DDP_BACKEND_AUTO) return backend;
    return mpi_launch_detected() ? DDP_BACKEND_MPI : DDP_BACKEND_SELF;
}

}  // namespace

void check_init_options(const ddp_init_options& opts) {
    if (opts.backend < DDP_BACKEND_AUTO || opts.backend > DDP_BACKEND_NCCL)
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->backend " + std::to_string(opts.backend) + " is not a ddp_backend");
    if (opts.mpi_comm_fortran != DDP_NO_MPI_COMM) {
        if (opts.mpi_comm_fortran < 0)
            fail(DDP_ERR_INVALID_ARGUMENT, "opts->mpi_comm_fortran " + std::to_string(opts.mpi_comm_fortran) +
                                               " is neither a Fortran handle nor DDP_NO_MPI_COMM");
        if (opts.backend != DDP_BACKEND_AUTO && opts.backend != DDP_BACKEND_MPI)
            fail(DDP_ERR_INVALID_ARGUMENT, "opts->mpi_comm_fortran is set, which needs the mpi backend");
    }
    check_timeout(opts.timeout_s, "opts->timeout_s", "default");
    if (std::isnan(opts.hang_watchdog_s) || std::isinf(opts.hang_watchdog_s))
        fail(DDP_ERR_INVALID_ARGUMENT,
             "opts->hang_watchdog_s must be a finite number (0: default, < 0: no hang watchdog)");
}

Settings resolve_settings(const ddp_init_options& opts) {
    Settings settings;
    settings.backend = fallback_backend(opts);
    if (opts.mpi_comm_fortran == DDP_NO_MPI_COMM && opts.backend == DDP_BACKEND_AUTO)
        settings.backend = decide_auto(backend_from_environment());
    settings.timeout_s = opts.timeout_s > 0 ? opts.timeout_s : env_seconds("DDP_TIMEOUT_S").value_or(1800.0);
    settings.stall_warning_s = env_seconds("DDP_STALL_WARN_S").value_or(60.0);
    settings.peer_dead_s = env_seconds("DDP_PEER_DEAD_S").value_or(default_peer_dead_s);
    settings.hang_grace_s = opts.hang_watchdog_s > 0   ? opts.hang_watchdog_s
                            : opts.hang_watchdog_s < 0 ? 0.0
                                                       : hang_grace_from_environment();
    const std::optional<int64_t> fusion_bytes = env_bytes("DDP_FUSION_BYTES");
    settings.fusion_bytes = fusion_bytes.value_or(settings.fusion_bytes);
    settings.log_threshold = log_threshold_from_environment();
    settings.timeline_path = env_string("DDP_TIMELINE").value_or("");
    settings.flight_recorder_size = env_count("DDP_FLIGHT_RECORDER_SIZE", int64_t{1} << 20).value_or(trace::default_flight_recorder_size);
    settings.flight_recorder_dir = env_string("DDP_FLIGHT_RECORDER_DIR").value_or("");
    settings.autotune_buckets = env_switch("DDP_AUTOTUNE").value_or(true) && !fusion_bytes;
    settings.planes = plane_switches_from_environment();
    return settings;
}

ddp_backend fallback_backend(const ddp_init_options& opts) {
    if (opts.mpi_comm_fortran != DDP_NO_MPI_COMM) return DDP_BACKEND_MPI;
    return decide_auto(opts.backend);
}

}  // namespace ddp
