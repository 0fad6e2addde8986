// The exported collectives, blocking and async: each fills one
// EntryArguments and runs it (NCCL's entry points each fill one ncclInfo);
// the checks follow what the kind's rules say it takes
// (api/collective_call), and core runs the call in call order.
#include <memory>
#include <string>

#include "api/boundary.hpp"
#include "api/collective_call.hpp"
#include "api/validate.hpp"
#include "core/async_dispatch.hpp"
#include "core/collectives/collective_rules.hpp"
#include "core/dispatch.hpp"
#include "core/group_calls.hpp"

namespace {

using namespace ddp;

/// The checked call of `kind` from an entry point's `arguments`; `also`
/// checks what only that entry point takes (inside, so that the peers are
/// told of it too).
template <typename Also>
CollectiveCall entry_call(Communicator& comm, CollectiveKind kind, const EntryArguments& arguments,
                          const ddp_collective_options* opts, Also also) {
    return valid_call(comm, kind, rules_for(kind).takes.list_name, opts,
                      [&](Communicator& c, const CallOptions& options) {
                          also();
                          return checked_call(c, kind, arguments, options);
                      });
}

/// Runs one blocking collective in call order on the caller's thread;
/// inside a group (ddp_group_start), starts it in the background for
/// ddp_group_end to wait for.
void blocking_collective(ddp_comm* handle, CollectiveKind kind, const EntryArguments& arguments,
                         const ddp_collective_options* opts) {
    Communicator& comm = live_comm(handle);
    CollectiveCall call = entry_call(comm, kind, arguments, opts, [] {});
    if (in_group()) return group_add(start_collective(comm, std::move(call)));
    run_blocking(comm, call);
}

/// Starts one async collective in call order: on the GPU, or on the
/// background thread.
void async_collective(ddp_comm* handle, CollectiveKind kind, const EntryArguments& arguments,
                      const ddp_collective_options* opts, ddp_request** request) {
    Communicator& comm = live_comm(handle);
    CollectiveCall call = entry_call(comm, kind, arguments, opts, [&] { require_not_null(request, "request"); });
    *request = std::make_unique<ddp_request>(ddp_request{start_collective(comm, std::move(call))}).release();
}

}  // namespace

extern "C" {

DDP_API ddp_status ddp_allreduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                             const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::allreduce, {.tensors = tensors, .n = n, .op = op}, opts);
    });
}

DDP_API ddp_status ddp_allreduce_tensor_list_async(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                                   const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::allreduce, {.tensors = tensors, .n = n, .op = op}, opts, request);
    });
}

DDP_API ddp_status ddp_broadcast_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, int32_t root,
                                             const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::broadcast, {.tensors = tensors, .n = n, .root = root}, opts);
    });
}

DDP_API ddp_status ddp_reduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                          int32_t root, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::reduce, {.tensors = tensors, .n = n, .op = op, .root = root},
                            opts);
    });
}

DDP_API ddp_status ddp_allgather_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                             int64_t n, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::allgather, {.tensors = inputs, .n = n, .outputs = outputs}, opts);
    });
}

DDP_API ddp_status ddp_allgather_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                   const ddp_tensor* outputs, int64_t n,
                                                   const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::allgather, {.tensors = inputs, .n = n, .outputs = outputs}, opts,
                         request);
    });
}

DDP_API ddp_status ddp_reduce_scatter_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                                  int64_t n, ddp_op op, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::reduce_scatter,
                            {.tensors = inputs, .n = n, .outputs = outputs, .op = op}, opts);
    });
}

DDP_API ddp_status ddp_reduce_scatter_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                        const ddp_tensor* outputs, int64_t n, ddp_op op,
                                                        const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::reduce_scatter,
                         {.tensors = inputs, .n = n, .outputs = outputs, .op = op}, opts, request);
    });
}

DDP_API ddp_status ddp_alltoall_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                            int64_t n, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::alltoall, {.tensors = inputs, .n = n, .outputs = outputs}, opts);
    });
}

DDP_API ddp_status ddp_alltoall_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                                  int64_t n, const ddp_collective_options* opts,
                                                  ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::alltoall, {.tensors = inputs, .n = n, .outputs = outputs}, opts,
                         request);
    });
}

DDP_API ddp_status ddp_sync_optimizer_state(ddp_comm* comm, const ddp_tensor* leaves, int64_t n, double* scalars,
                                            int64_t n_scalars, int32_t root, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::sync_optimizer_state,
                            {.tensors = leaves, .n = n, .root = root, .scalars = scalars, .n_scalars = n_scalars},
                            opts);
    });
}

DDP_API ddp_status ddp_check_replicas(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                      const ddp_collective_options* opts, int32_t* identical) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        // Refused here alone: the thread driving the group's ranks learns it at once.
        if (in_group())
            fail(DDP_ERR_INVALID_ARGUMENT, "ddp_check_replicas answers at once, so it cannot run inside a group "
                                           "(call it after ddp_group_end)");
        CollectiveCall call = entry_call(c, CollectiveKind::check_replicas, {.tensors = tensors, .n = n}, opts,
                                         [&] { require_not_null(identical, "identical"); });
        bool same = true;
        std::string difference;
        call.identical = &same;
        call.difference = &difference;
        run_blocking(c, call);
        *identical = same ? 1 : 0;
        if (!same) set_last_error(difference);
    });
}

DDP_API ddp_status ddp_group_start(void) {
    return guarded([] { group_start(); });
}

DDP_API ddp_status ddp_group_end(void) {
    return guarded([] { group_end(); });
}

DDP_API ddp_status ddp_barrier(ddp_comm* comm, const ddp_collective_options* opts) {
    return guarded([&] { blocking_collective(comm, CollectiveKind::barrier, {}, opts); });
}

DDP_API ddp_status ddp_report_invalid_call(ddp_comm* comm, const char* collective, const char* reason,
                                           const ddp_collective_options* opts) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        require_not_null(collective, "collective");
        const CollectiveKind kind = reportable_kind(collective);
        double timeout_s = 0;
        try {
            timeout_s = checked_call_options(opts, c).timeout_s;
        } catch (const Error&) {
            // The call's own timeout could not be read: the communicator's serves.
        }
        announce_binding_invalid_call(c, kind, timeout_s, reason != nullptr ? reason : "");
    });
}

}  // extern "C"
