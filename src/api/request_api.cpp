// The exported request calls: waiting on, testing and freeing a started
// async collective.
#include <memory>

#include "api/boundary.hpp"
#include "api/validate.hpp"
#include "core/async_dispatch.hpp"
#include "device/cuda/cuda.hpp"

using namespace ddp;

extern "C" {

DDP_API ddp_status ddp_request_wait(ddp_request* request) {
    return guarded([&] {
        throw_if_failed(*require_not_null(request, "request").state);
    });
}

DDP_API ddp_status ddp_request_test(ddp_request* request, int32_t* done) {
    return guarded([&] {
        require_not_null(request, "request");
        require_not_null(done, "done");
        *done = request->state->done() ? 1 : 0;
        if (*done) throw_if_failed(*request->state);
    });
}

DDP_API ddp_status ddp_request_stream_wait(ddp_request* request, void* cuda_stream) {
    return guarded([&] {
        require_not_null(request, "request");
        if (!request->event) {  // not on the GPU (or not yet enqueued there): the host waits
            throw_if_failed(*request->state);
            return;
        }
        // NULL and the per-thread stream name a stream of the current device: the communicator's.
        const cuda::DeviceScope on_device(request->device);
        request->event->make_wait(cuda_stream);
        if (request->state->done()) throw_if_failed(*request->state);
    });
}

DDP_API ddp_status ddp_request_free(ddp_request* request) {
    if (request == nullptr) return DDP_OK;
    std::unique_ptr<ddp_request> owned(request);
    return ddp_request_wait(owned.get());
}

}  // extern "C"
