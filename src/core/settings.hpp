// Everything a communicator's behaviour depends on, resolved once at
// ddp_init from the options and the environment (options win). Resolving
// once means a bad environment variable fails ddp_init on every rank
// together, instead of one collective on one rank later.
#pragma once

#include <cstdint>
#include <string>

#include "control/peer_liveness.hpp"
#include "planes/planes_in_front.hpp"
#include "trace/flight_recorder.hpp"

#include "ddp/ddp.h"

namespace ddp {

struct Settings {
    ddp_backend backend = DDP_BACKEND_AUTO;  ///< after auto is decided
    double timeout_s = 1800;
    double stall_warning_s = 60;
    double hang_grace_s = 60;  ///< past a deadline, before the hang watchdog aborts (0: off)
    /// DDP_PEER_DEAD_S: how long a peer on this host may stay stopped
    /// (SIGSTOP, a debugger), or one on another host leave heartbeats
    /// unanswered, before a wait counts it as dead.
    double peer_dead_s = default_peer_dead_s;
    int64_t fusion_bytes = int64_t{1} << 20;  ///< the default when a call passes 0
    int log_threshold = DDP_LOG_INFO;
    /// DDP_TIMELINE: a timeline starts in ddp_init ("": none).
    std::string timeline_path;
    /// DDP_FLIGHT_RECORDER_SIZE: collectives the flight recorder keeps.
    int64_t flight_recorder_size = trace::default_flight_recorder_size;
    /// DDP_FLIGHT_RECORDER_DIR: where automatic dumps go ("": the log).
    std::string flight_recorder_dir;
    /// DDP_SHM, DDP_SHM_STREAM, DDP_HIERARCHICAL: what the planes in front may do.
    PlaneSwitches planes;
    /// DDP_AUTOTUNE: whether a call with no fusion_bytes of its own gets its
    /// bucket size by measurement (core/bucket_tuning.hpp) instead of
    /// fusion_bytes above. DDP_FUSION_BYTES, a size chosen by hand, turns it off.
    bool autotune_buckets = true;
};

/// Throws DDP_ERR_INVALID_ARGUMENT naming the first bad field of `opts`.
void check_init_options(const ddp_init_options& opts);

/// The settings for checked `opts` and the environment. Throws
/// DDP_ERR_INVALID_ARGUMENT naming the environment variable that is wrong.
Settings resolve_settings(const ddp_init_options& opts);

/// The backend `opts` ask for, ignoring the environment: a rank whose
/// environment is wrong still starts it, to fail together with its peers.
ddp_backend fallback_backend(const ddp_init_options& opts);

}  // namespace ddp
