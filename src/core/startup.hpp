// ddp_init's start of the world: the settings from the options and the
// environment, the backend they choose, the rank's GPU, the transport and
// NCCL's device plane beside it, and the timeline when DDP_TIMELINE asks for
// one. Every rank fails together (control/startup's exchange), and a failed
// start waits a bounded time for its peers before it releases the transport.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/comm_registry.hpp"
#include "ddp/ddp.h"
#include "util/error.hpp"

namespace ddp {

/// Starts the world for checked `opts` and registers its handle. Throws
/// DDP_ERR_ALREADY_INITIALIZED while an earlier world is live, and on every
/// rank together the error that stopped any rank's start.
CommHandle& start_world(const ddp_init_options& opts);

/// ddp_init_local: ranks 0..size-1 of one group in this process (threads
/// drive them) for `opts`; their handles in rank order. With `devices`
/// (one each, checked >= 0), rank i runs NCCL on GPU devices[i]; else host
/// memory only. `invalid`: why the arguments were refused, if they were.
/// Alone, that or a bad environment variable throws before any rank
/// starts, and a failed NCCL set-up fails every rank together. Under an MPI
/// launcher every process's threads make one group (rank = MPI rank x size
/// + i); a process's refusal starts MPI all the same, so that every process
/// fails together.
std::vector<CommHandle*> start_local_group(const ddp_init_options& opts, int size, std::span<const int32_t> devices,
                                           const std::optional<Error>& invalid);

}  // namespace ddp
