// How a validated async call takes its place in the communicator's call
// order: enqueued on the caller's CUDA stream now (work that runs on the
// GPU), or queued for the communicator's background thread; either way a
// request whose state the caller waits on.
#pragma once

#include <memory>

#include "core/async_worker.hpp"
#include "core/collectives.hpp"
#include "core/communicator.hpp"
#include "core/request.hpp"

namespace ddp {

/// Starts the validated `call` in call order. The caller's arrays (tensor
/// lists, names) may be freed once it returns. Errors of the operation
/// (mismatch, timeout) go to the request; refusals (another thread inside)
/// are thrown.
Request start_collective(Communicator& comm, CollectiveCall call);

/// Waits for the request and throws its error, if it failed.
void throw_if_failed(RequestState& state);

}  // namespace ddp
