// The NCCL communicators of ranks that are threads (ddp_init_local with
// devices): one per transport, each set up on a thread of its own, all at
// once, as the group's ranks do.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "control/control_plane.hpp"
#include "planes/nccl/nccl_comm.hpp"
#include "planes/nccl/nccl_library.hpp"
#include "planes/transport.hpp"
#include "util/error.hpp"

/// Sets up an NcclComm over each of `transports` (its channel and first
/// host plane) on a thread of its own, its waits held to `timeout_s`;
/// `then(thread, comm, context)` runs on that thread once it is set up. A
/// failure is the test's, naming the thread; its communicator stays null.
template <typename Then>
std::vector<std::unique_ptr<ddp::NcclComm>> nccl_comms_on_threads(
    const ddp::NcclLibrary& nccl, const std::vector<std::unique_ptr<ddp::Transport>>& transports, double timeout_s,
    Then then) {
    std::vector<std::unique_ptr<ddp::NcclComm>> comms(transports.size());
    std::vector<std::jthread> running;
    for (size_t thread = 0; thread < transports.size(); ++thread)
        running.emplace_back([&, thread] {
            ddp::Transport& transport = *transports[thread];
            ddp::ControlPlane control(transport.channel(), timeout_s, timeout_s, 0);
            ddp::CallContext context = control.begin(ddp::CollectiveKind::barrier, 0);
            try {
                comms[thread] = std::make_unique<ddp::NcclComm>(nccl, transport.channel(),
                                                                *transport.host_planes().front(), control, context);
                then(static_cast<int>(thread), *comms[thread], context);
            } catch (const ddp::Error& error) {
                ADD_FAILURE() << "thread " << thread << ": " << error.what();
            }
            control.end();
        });
    running.clear();  // joins every thread
    return comms;
}
