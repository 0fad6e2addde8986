// One handle for a started async call, whatever runs it (c10d's Work): the
// state the caller waits on and, for work that runs on the GPU, the event
// that marks its end on the stream.
#pragma once

#include <memory>

#include "core/async_worker.hpp"
#include "device/cuda/cuda.hpp"

namespace ddp {

struct Request {
    /// Completed by the background thread, or by the watchdog for GPU work.
    std::shared_ptr<RequestState> state = std::make_shared<RequestState>();
    /// For a request that runs on the GPU: the end of its work on the stream.
    std::shared_ptr<cuda::Event> event = nullptr;  // stated, so that Request{.state = ...} initializes every member
    /// The communicator's GPU (with `event`): ddp_request_stream_wait makes it current.
    int device = -1;
};

}  // namespace ddp
