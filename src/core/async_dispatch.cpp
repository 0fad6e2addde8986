#include "core/async_dispatch.hpp"

#include <string>
#include <vector>

#include "core/device_collectives.hpp"
#include "core/dispatch.hpp"
#include "trace/timeline.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

/// An async call on the GPU: enqueued on the caller's stream now, in call
/// order; the watchdog completes the request when the GPU is done. Errors
/// of the operation (mismatch, timeout) go to the request, as they would
/// from the background thread.
Request start_on_gpu(Communicator& comm, CollectiveCall& call) {
    call.gpu_request = std::make_shared<Request>();
    call.gpu_request->device = comm.device();
    try {
        comm.run([&] { run_collective(comm, call); });
    } catch (const Error& error) {
        if (error.status() == DDP_ERR_INVALID_ARGUMENT) throw;  // another thread is inside: refused, as in submit
        call.gpu_request->state->complete(error.status(), error.what());
    }
    return *call.gpu_request;
}

/// An async call on the communicator's background thread. Device buffers
/// staged through the host start there once the caller's stream has
/// reached the call (an event recorded now), on libddp's own stream.
Request start_in_background(Communicator& comm, CollectiveCall call) {
    // The caller may free its arrays.
    std::vector<ddp_tensor> owned(call.tensors.begin(), call.tensors.end());
    std::vector<ddp_tensor> owned_outputs(call.outputs.begin(), call.outputs.end());
    // The names too, when a timeline will show them.
    trace::Timeline& timeline = comm.trace().timeline;
    auto names = std::make_shared<std::vector<std::string>>();
    if (timeline.on())
        for (const char* name : call.names) names->push_back(name != nullptr ? name : "");
    const int64_t queued_ns = timeline.on() ? trace::now_ns() : 0;
    std::shared_ptr<cuda::Event> reached;
    if (call.on_device) {
        try {
            const cuda::DeviceScope on_device(comm.device());  // the event must be on the stream's GPU
            reached = std::make_shared<cuda::Event>();
            reached->record(call.stream);
        } catch (const Error& error) {
            // Before agreement: the peers learn of it there, instead of waiting.
            reject_invalid_call(comm, call.kind, call.timeout_s, error);
        }
    }
    auto state = comm.submit([&comm, owned = std::move(owned), owned_outputs = std::move(owned_outputs), reached, call,
                              names, queued_ns]() mutable {
        call.tensors = owned;
        call.outputs = owned_outputs;
        std::vector<const char*> name_pointers;
        for (const std::string& name : *names) name_pointers.push_back(name.c_str());
        call.names = name_pointers;
        trace::Timeline& timeline = comm.trace().timeline;
        if (timeline.on() && queued_ns != 0) {
            trace::Event queued = trace::ended_now("queued", trace::thread_row(trace::Row::queue), queued_ns, 0);
            queued.bytes = 0;
            for (const ddp_tensor& tensor : call.tensors) queued.bytes += static_cast<int64_t>(byte_size(tensor));
            timeline.record(std::move(queued));
        }
        if (reached) {
            const cuda::DeviceScope on_device(comm.device());  // this thread has no GPU current of its own
            call.stream = comm.memory().own_stream();
            reached->make_wait(call.stream);
        }
        run_collective(comm, call);
    });
    return Request{.state = std::move(state)};
}

}  // namespace

Request start_collective(Communicator& comm, CollectiveCall call) {
    // Ranks that are threads of one process may be driven by one thread (a
    // group, or async calls in turn): their agreement must not wait on it.
    const bool on_caller_thread = runs_on_gpu(comm, call) && !comm.transport().ranks_are_threads();
    return on_caller_thread ? start_on_gpu(comm, call) : start_in_background(comm, std::move(call));
}

void throw_if_failed(RequestState& state) {
    std::string message;
    const ddp_status status = state.wait(message);
    if (status != DDP_OK) fail(status, message);
}

}  // namespace ddp
