// The exported calls that start and end communicators: ddp_init and
// ddp_finalize of the world, the splits and ddp_comm_free of
// sub-communicators, and ddp_comm_abort. Start-up and the handles'
// bookkeeping are core's (core/startup, core/comm_registry).
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/boundary.hpp"
#include "api/options.hpp"
#include "api/validate.hpp"
#include "core/comm_registry.hpp"
#include "core/dispatch.hpp"
#include "core/group_calls.hpp"
#include "core/settings.hpp"
#include "core/split.hpp"
#include "core/startup.hpp"
#include "util/timeout.hpp"

namespace {

using namespace ddp;

/// The most ranks ddp_init_local starts (a thread each).
constexpr int32_t max_local_ranks = 4096;

/// ddp_comm_split and ddp_comm_split_node: validation (an invalid call
/// still takes part, so that the peers fail at once), then the split, whose
/// handle core keeps with the world.
void split_handle(ddp_comm* handle, SplitRequest request, const ddp_split_options* opts, ddp_comm** out,
                  const char* out_name) {
    Communicator& parent = live_comm(handle);
    // Refused here alone: the thread driving the group's ranks learns it at once.
    if (in_group())
        fail(DDP_ERR_INVALID_ARGUMENT, std::string("ddp_") + kind_name(static_cast<uint64_t>(request.kind)) +
                                           " returns the new communicator at once, so it cannot run inside a group "
                                           "(call it after ddp_group_end, from a thread per rank)");
    try {
        require_not_null(out, out_name);
        const ddp_split_options read = read_options(opts, default_split_options(), "opts");
        check_timeout(read.timeout_s, "opts->timeout_s", "the parent's");
        request.timeout_s = read.timeout_s;
        if (request.color < 0 && request.color != DDP_COLOR_UNDEFINED)
            fail(DDP_ERR_INVALID_ARGUMENT, "color is " + std::to_string(request.color) +
                                               "; it must be >= 0, or DDP_COLOR_UNDEFINED (-1) to join none");
    } catch (const Error& invalid) {
        reject_invalid_call(parent, request.kind, 0, invalid);
    }
    *out = c_handle(add_split(*handle_of(handle), request));
}

}  // namespace

extern "C" {

DDP_API ddp_status ddp_init(const ddp_init_options* opts_in, ddp_comm** world) {
    return guarded([&] {
        require_not_null(world, "world");
        const ddp_init_options opts = read_options(opts_in, default_init_options(), "opts");
        check_init_options(opts);
        *world = c_handle(&start_world(opts));
    });
}

DDP_API ddp_status ddp_init_local(int32_t n, const int32_t* devices, const ddp_init_options* opts_in,
                                  ddp_comm** comms) {
    return guarded([&] {
        // Refused arguments are core's to throw: under an MPI launcher the
        // process starts MPI all the same, so that every process fails at once.
        std::optional<Error> invalid;
        ddp_init_options opts = default_init_options();
        std::span<const int32_t> gpus;
        try {
            require_not_null(comms, "comms");
            if (n < 1 || n > max_local_ranks)
                fail(DDP_ERR_INVALID_ARGUMENT,
                     "n is " + std::to_string(n) + "; it must be 1 to " + std::to_string(max_local_ranks));
            opts = read_options(opts_in, default_init_options(), "opts");
            check_init_options(opts);
            if (opts.backend != DDP_BACKEND_AUTO)
                fail(DDP_ERR_INVALID_ARGUMENT, "opts->backend is " + std::to_string(static_cast<int>(opts.backend)) +
                                                   "; a group from ddp_init_local runs its own in-process transport: "
                                                   "leave it DDP_BACKEND_AUTO");
            if (opts.mpi_comm_fortran != DDP_NO_MPI_COMM)
                fail(DDP_ERR_INVALID_ARGUMENT, "opts->mpi_comm_fortran names an MPI communicator; a group from "
                                               "ddp_init_local runs without MPI: leave it DDP_NO_MPI_COMM");
            if (devices != nullptr) {
                gpus = {devices, static_cast<size_t>(n)};
                for (int32_t i = 0; i < n; ++i)
                    if (gpus[static_cast<size_t>(i)] < 0)
                        fail(DDP_ERR_INVALID_ARGUMENT, "devices[" + std::to_string(i) + "] is " +
                                                           std::to_string(gpus[static_cast<size_t>(i)]) +
                                                           "; it must be a CUDA device id >= 0");
            }
        } catch (const Error& error) {
            invalid = error;
            opts = default_init_options();
            gpus = {};
        }
        const std::vector<CommHandle*> ranks = start_local_group(opts, n, gpus, invalid);
        for (size_t i = 0; i < ranks.size(); ++i) comms[i] = c_handle(ranks[i]);
    });
}

DDP_API ddp_status ddp_finalize(ddp_comm* world) {
    return guarded([&] {
        CommHandle& handle = checked_handle(world, "world");
        if (handle.world != nullptr)
            fail(DDP_ERR_INVALID_ARGUMENT, "world is a sub-communicator (from ddp_comm_split); free it with "
                                           "ddp_comm_free, and finalize the world it came from with ddp_finalize");
        finalize_world(handle);
    });
}

DDP_API ddp_status ddp_comm_split(ddp_comm* comm, int32_t color, int32_t key, const ddp_split_options* opts,
                                  ddp_comm** sub) {
    return guarded([&] {
        split_handle(comm, SplitRequest{CollectiveKind::comm_split, color, key, 0}, opts, sub, "sub");
    });
}

DDP_API ddp_status ddp_comm_split_node(ddp_comm* comm, const ddp_split_options* opts, ddp_comm** node) {
    return guarded([&] {
        split_handle(comm, SplitRequest{CollectiveKind::comm_split_node, 0, 0, 0}, opts, node, "node");
    });
}

DDP_API ddp_status ddp_comm_free(ddp_comm* sub) {
    if (sub == nullptr) return DDP_OK;  // a rank that joined no sub-communicator
    return guarded([&] {
        CommHandle& handle = checked_handle(sub, "sub");
        if (handle.world == nullptr)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "sub is the world communicator (from ddp_init); end it with ddp_finalize, which also frees its "
                 "sub-communicators");
        free_sub(handle);
    });
}

DDP_API ddp_status ddp_comm_abort(ddp_comm* comm, const char* reason) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        c.control().abort(reason != nullptr ? reason : "no reason given");
    });
}

}  // extern "C"
