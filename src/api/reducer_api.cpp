// The exported reducer calls: creating a reducer over a gradient list,
// marking gradients ready, waiting for (or failing) the step, freeing it.
#include <memory>
#include <string>
#include <string_view>

#include "api/boundary.hpp"
#include "api/collective_call.hpp"
#include "api/validate.hpp"
#include "core/comm_registry.hpp"
#include "core/group_calls.hpp"
#include "core/reducer.hpp"

struct ddp_reducer {
    ddp_comm* comm;  // checked on every call: the communicator may be finalized first
    std::unique_ptr<ddp::Reducer> reducer;
};

namespace {

using namespace ddp;

/// The reducer keeps its buckets in host memory (see ddp_reducer_create).
void refuse_device_gradients(std::span<const ddp_tensor> gradients) {
    for (size_t i = 0; i < gradients.size(); ++i)
        if (gradients[i].device_type == DDP_DEVICE_CUDA)
            fail(DDP_ERR_UNSUPPORTED, "gradients[" + std::to_string(i) +
                                          "] is in device memory, but the reducer keeps its buckets in host memory "
                                          "in this version; reduce device gradients with ddp_allreduce_tensor_list");
}

/// A reducer step waits for its peers on the caller's thread, which one
/// thread driving every rank (a group) cannot give it.
void refuse_inside_group(const char* function) {
    if (in_group())
        fail(DDP_ERR_INVALID_ARGUMENT, std::string(function) + " cannot run inside a group (ddp_group_start): a "
                                       "reducer's rank needs a thread of its own; call it after ddp_group_end");
}

}  // namespace

extern "C" {

DDP_API ddp_status ddp_reducer_create(ddp_comm* comm, const ddp_tensor* gradients, int64_t n, ddp_op op,
                                      const ddp_collective_options* opts, ddp_reducer** reducer) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        refuse_inside_group("ddp_reducer_create");
        const CollectiveCall call =
            valid_call(c, CollectiveKind::reducer_create, "gradients", opts, [&](Communicator&, const CallOptions& options) {
                require_not_null(reducer, "reducer");
                CollectiveCall valid;
                valid.tensors = checked_tensor_list(gradients, n, "gradients", DataPointers::ignored);
                refuse_device_gradients(valid.tensors);
                valid.op = checked_op(op, valid.tensors);
                valid.fusion_bytes = options.fusion_bytes;
                return valid;
            });
        c.run([&] {
            // The reducer's buckets keep one size (0: the default, never measured):
            // they are the gradients' storage, fixed at creation.
            const int64_t bucket_bytes = call.fusion_bytes > 0    ? call.fusion_bytes
                                         : call.fusion_bytes == 0 ? c.settings().fusion_bytes
                                                                  : 0;
            auto made = std::make_unique<ddp_reducer>(ddp_reducer{
                comm, std::make_unique<Reducer>(c, call.tensors, call.op, bucket_bytes, call.timeout_s, call.names)});
            *reducer = made.release();
        });
    });
}

namespace {
Reducer& live_reducer(ddp_reducer* handle) {
    if (handle == nullptr) fail(DDP_ERR_INVALID_ARGUMENT, "reducer is NULL");
    live_comm(handle->comm);
    return *handle->reducer;
}

size_t checked_gradient_index(const Reducer& reducer, int64_t index) {
    if (index < 0 || index >= reducer.size())
        fail(DDP_ERR_INVALID_ARGUMENT, "index is " + std::to_string(index) + "; the reducer has " +
                                           std::to_string(reducer.size()) + " gradients");
    return static_cast<size_t>(index);
}
}  // namespace

DDP_API ddp_status ddp_reducer_gradient(ddp_reducer* reducer, int64_t index, ddp_tensor* gradient) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        checked_gradient_index(r, index);
        require_not_null(gradient, "gradient") = r.gradient(index);
    });
}

DDP_API ddp_status ddp_reducer_mark_ready(ddp_reducer* reducer, int64_t index) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        checked_gradient_index(r, index);
        refuse_inside_group("ddp_reducer_mark_ready");
        live_comm(reducer->comm).run_unordered([&] { r.mark_ready(index); });
    });
}

DDP_API ddp_status ddp_reducer_wait(ddp_reducer* reducer) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        refuse_inside_group("ddp_reducer_wait");
        live_comm(reducer->comm).run_unordered([&] { r.wait(); });
    });
}

DDP_API ddp_status ddp_reducer_fail_step(ddp_reducer* reducer, const char* reason) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        try {
            live_comm(reducer->comm).run_unordered([&] { r.wait(std::string_view(reason != nullptr ? reason : "")); });
        } catch (const Error& error) {
            // The step ended, as a mismatch (what it is for) or broken: the binding reports its own error.
            if (error.status() == DDP_ERR_INVALID_ARGUMENT) throw;  // refused: another thread is inside, or another reducer's step is open
        }
    });
}

DDP_API ddp_status ddp_reducer_free(ddp_reducer* reducer) {
    if (reducer == nullptr) return DDP_OK;
    return guarded([&] {
        const CommHandle* handle = handle_of(reducer->comm);
        const bool comm_live = handle != nullptr && handle->magic == CommHandle::expected_magic && handle->live;
        if (!comm_live) {  // the communicator is gone: nothing can be in flight any more
            std::unique_ptr<ddp_reducer> owned(reducer);
            return;
        }
        // Refused (and nothing freed) while another thread is inside a call on the communicator.
        handle->live->run_unordered([&] {
            std::unique_ptr<ddp_reducer> owned(reducer);
            if (owned->reducer->step_open()) owned->reducer->wait();
        });
    });
}

}  // extern "C"
