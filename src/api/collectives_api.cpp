// The exported collectives, blocking and async: each checks its arguments
// into a complete call (api/collective_call) that core runs in call order.
#include <memory>
#include <string>

#include "api/boundary.hpp"
#include "api/collective_call.hpp"
#include "api/validate.hpp"
#include "core/async_dispatch.hpp"
#include "core/dispatch.hpp"

namespace {

using namespace ddp;

/// Runs one blocking collective in call order on the caller's thread.
template <typename EntryArguments>
void blocking_collective(ddp_comm* handle, CollectiveKind kind, const ddp_collective_options* opts,
                         EntryArguments entry_arguments) {
    Communicator& comm = live_comm(handle);
    run_blocking(comm, valid_call(comm, kind, opts, entry_arguments));
}

/// Starts one async collective in call order: on the GPU, or on the
/// background thread.
template <typename EntryArguments>
void async_collective(ddp_comm* handle, CollectiveKind kind, const ddp_collective_options* opts,
                      ddp_request** request, EntryArguments entry_arguments) {
    Communicator& comm = live_comm(handle);
    CollectiveCall call = valid_call(comm, kind, opts, [&](Communicator& c, const CallOptions& options) {
        require_not_null(request, "request");
        return entry_arguments(c, options);
    });
    *request = std::make_unique<ddp_request>(ddp_request{start_collective(comm, std::move(call))}).release();
}

CollectiveCall allreduce_call(const ddp_tensor* tensors, int64_t n, int op, const CallOptions& options) {
    CollectiveCall call;
    call.tensors = checked_writable_list(tensors, n, "tensors");
    call.op = checked_op(op, call.tensors);
    call.fusion_bytes = options.fusion_bytes;
    return call;
}

/// allgather's or reduce_scatter's call: inputs read, outputs written.
CollectiveCall sharded_call(Communicator& comm, const ddp_tensor* inputs, const ddp_tensor* outputs, int64_t n,
                            Sharding sharding, const CallOptions& options) {
    CollectiveCall call;
    call.tensors = checked_tensor_list(inputs, n, "inputs");
    call.outputs = checked_outputs(call.tensors, outputs, sharding, comm.channel().size(), comm.channel().rank());
    call.fusion_bytes = options.fusion_bytes;
    return call;
}

CollectiveCall reduce_scatter_call(Communicator& comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                   int64_t n, int op, const CallOptions& options) {
    CollectiveCall call = sharded_call(comm, inputs, outputs, n, Sharding::scatter, options);
    call.op = checked_op(op, call.tensors);
    return call;
}

}  // namespace

extern "C" {

DDP_API ddp_status ddp_allreduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                             const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::allreduce, opts, [&](Communicator&, const CallOptions& options) {
            return allreduce_call(tensors, n, op, options);
        });
    });
}

DDP_API ddp_status ddp_allreduce_tensor_list_async(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                                   const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::allreduce, opts, request, [&](Communicator&, const CallOptions& options) {
            return allreduce_call(tensors, n, op, options);
        });
    });
}

DDP_API ddp_status ddp_broadcast_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, int32_t root,
                                             const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::broadcast, opts, [&](Communicator& c, const CallOptions& options) {
            CollectiveCall call;
            call.tensors = checked_writable_list(tensors, n, "tensors");
            call.root = checked_root(root, c.channel().size());
            call.fusion_bytes = options.fusion_bytes;
            return call;
        });
    });
}

DDP_API ddp_status ddp_reduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                          int32_t root, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::reduce, opts, [&](Communicator& c, const CallOptions& options) {
            CollectiveCall call;
            call.tensors = checked_writable_list(tensors, n, "tensors");
            call.op = checked_op(op, call.tensors);
            call.root = checked_root(root, c.channel().size());
            call.fusion_bytes = options.fusion_bytes;
            return call;
        });
    });
}

DDP_API ddp_status ddp_allgather_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                             int64_t n, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::allgather, opts, [&](Communicator& c, const CallOptions& options) {
            return sharded_call(c, inputs, outputs, n, Sharding::gather, options);
        });
    });
}

DDP_API ddp_status ddp_allgather_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                   const ddp_tensor* outputs, int64_t n,
                                                   const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::allgather, opts, request, [&](Communicator& c, const CallOptions& options) {
            return sharded_call(c, inputs, outputs, n, Sharding::gather, options);
        });
    });
}

DDP_API ddp_status ddp_reduce_scatter_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                                  int64_t n, ddp_op op, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::reduce_scatter, opts,
                            [&](Communicator& c, const CallOptions& options) {
                                return reduce_scatter_call(c, inputs, outputs, n, op, options);
                            });
    });
}

DDP_API ddp_status ddp_reduce_scatter_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                        const ddp_tensor* outputs, int64_t n, ddp_op op,
                                                        const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::reduce_scatter, opts, request,
                         [&](Communicator& c, const CallOptions& options) {
                             return reduce_scatter_call(c, inputs, outputs, n, op, options);
                         });
    });
}

DDP_API ddp_status ddp_sync_optimizer_state(ddp_comm* comm, const ddp_tensor* leaves, int64_t n, double* scalars,
                                            int64_t n_scalars, int32_t root, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(
            comm, CollectiveKind::sync_optimizer_state, opts, [&](Communicator& c, const CallOptions& options) {
                CollectiveCall call;
                call.tensors = checked_writable_list(leaves, n, "leaves");
                if (n_scalars < 0)
                    fail(DDP_ERR_INVALID_ARGUMENT, "n_scalars is " + std::to_string(n_scalars) + "; it must be >= 0");
                if (n_scalars > 0 && scalars == nullptr)
                    fail(DDP_ERR_INVALID_ARGUMENT, "scalars is NULL but n_scalars is " + std::to_string(n_scalars));
                call.scalars = std::span(scalars, static_cast<size_t>(n_scalars));
                call.root = checked_root(root, c.channel().size());
                call.fusion_bytes = options.fusion_bytes;
                return call;
            });
    });
}

DDP_API ddp_status ddp_check_replicas(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                      const ddp_collective_options* opts, int32_t* identical) {
    return guarded([&] {
        bool same = true;
        std::string difference;
        blocking_collective(comm, CollectiveKind::check_replicas, opts, [&](Communicator&, const CallOptions&) {
            require_not_null(identical, "identical");
            CollectiveCall call;
            call.tensors = checked_tensor_list(tensors, n, "tensors");  // read only: overlap is fine
            call.identical = &same;
            call.difference = &difference;
            return call;
        });
        *identical = same ? 1 : 0;
        if (!same) set_last_error(difference);
    });
}

DDP_API ddp_status ddp_barrier(ddp_comm* comm, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::barrier, opts,
                            [](Communicator&, const CallOptions&) { return CollectiveCall{}; });
    });
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
