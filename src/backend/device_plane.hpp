// The data plane of device buffers on a backend that moves them on the GPU
// (nccl): collectives enqueued on the caller's CUDA stream, returning
// without waiting for the GPU, and a watchdog that holds the enqueued work
// to its deadline. Backends without one (mpi, self) get device buffers
// staged through host memory instead (core/staged_collectives.cpp).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "backend/backend.hpp"
#include "ddp/ddp.h"

namespace ddp {

namespace cuda {
class Event;
}

/// How the watchdog reports the end of watched work: DDP_OK, or the failure.
using WorkEnd = std::function<void(ddp_status status, const std::string& message)>;

class DevicePlane {
public:
    virtual ~DevicePlane() = default;

    /// Whether this plane reduces `op` on `dtype` with libddp's semantics
    /// (NCCL's float MIN and MAX do not promise to propagate NaN, so those
    /// are staged through the host instead).
    virtual bool reduces(ddp_op op, ddp_dtype dtype) const = 0;

    /// Each enqueues one collective over the whole list on `stream` and
    /// returns; `deadline` bounds the enqueueing itself. AVG is SUM, then
    /// a division by the world size on the GPU.
    virtual void allreduce(std::span<const ddp_tensor> tensors, ddp_op op, void* stream,
                           Clock::time_point deadline) = 0;
    virtual void reduce(std::span<const ddp_tensor> tensors, ddp_op op, int root, void* stream,
                        Clock::time_point deadline) = 0;
    virtual void broadcast(std::span<const ddp_tensor> tensors, int root, void* stream,
                           Clock::time_point deadline) = 0;
    /// outputs[i] gets every rank's inputs[i], in rank order.
    virtual void allgather(std::span<const ddp_tensor> inputs, std::span<const ddp_tensor> outputs, void* stream,
                           Clock::time_point deadline) = 0;
    /// outputs[i] gets this rank's shard of the reduction of inputs[i].
    virtual void reduce_scatter(std::span<const ddp_tensor> inputs, std::span<const ddp_tensor> outputs, ddp_op op,
                                void* stream, Clock::time_point deadline) = 0;

    /// Hands the work enqueued on `stream` so far to the watchdog, which
    /// holds it to `deadline` (naming it `what` in errors) and calls `end`
    /// when it finishes or fails. Returns the event that marks its end.
    virtual std::shared_ptr<cuda::Event> watch(void* stream, Clock::time_point deadline, std::string what,
                                               WorkEnd end) = 0;

    /// Where the watchdog reports a failure (a timeout, an NCCL error)
    /// after aborting NCCL: the communicator's control plane, which breaks
    /// the communicator and tells the peers.
    virtual void on_failure(std::function<void(ddp_status, const std::string&)> report) = 0;
};

}  // namespace ddp
