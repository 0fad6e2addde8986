// The exported calls that start and end communicators: ddp_init and
// ddp_finalize of the world, the splits and ddp_comm_free of
// sub-communicators, and ddp_comm_abort. Start-up and the handles'
// bookkeeping are core's (core/startup, core/comm_registry).
#include <string>

#include "api/boundary.hpp"
#include "api/options.hpp"
#include "api/validate.hpp"
#include "core/comm_registry.hpp"
#include "core/dispatch.hpp"
#include "core/settings.hpp"
#include "core/split.hpp"
#include "core/startup.hpp"
#include "util/timeout.hpp"

namespace {

using namespace ddp;

/// ddp_comm_split and ddp_comm_split_node: validation (an invalid call
/// still takes part, so that the peers fail at once), then the split, whose
/// handle core keeps with the world.
void split_handle(ddp_comm* handle, SplitRequest request, const ddp_split_options* opts, ddp_comm** out,
                  const char* out_name) {
    Communicator& parent = live_comm(handle);
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
