// A device data plane: moves device buffers on the GPU (nccl), whole lists
// at a time, enqueued on the caller's CUDA stream and returning without
// waiting for the GPU; a watchdog holds the enqueued work to its deadline.
// It sits beside a transport, whose control channel it uses. A call no
// device plane runs is staged through pinned host memory over the host
// planes instead (core/staged_collectives.cpp): the last entry of the
// device priority list. Like a host plane it lists what it implements in a
// table (planes/capabilities.hpp); an operation it lacks says
// DDP_ERR_UNSUPPORTED (`lacks`).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ddp/ddp.h"
#include "control/channel.hpp"
#include "planes/host_plane.hpp"
#include "util/pending.hpp"

namespace ddp {

namespace cuda {
class Event;
}

/// How the watchdog reports the end of watched work: DDP_OK, or the failure.
using WorkEnd = std::function<void(ddp_status status, const std::string& message)>;

class DevicePlane {
public:
    virtual ~DevicePlane() = default;
    virtual const char* name() const = 0;

    /// What this plane implements (device memory only), the same on every
    /// rank (planes/capabilities.hpp).
    virtual std::span<const Capability> capabilities() const = 0;
    /// Whether the table covers `op` on `dtype` reduced with `reduction`
    /// (which may be AVG: device planes divide on the GPU).
    bool runs(DataOp op, ddp_dtype dtype, ddp_op reduction) const {
        return covers(capabilities(), op, dtype, reduction, Memory::device, 0);
    }

    /// Each enqueues one collective over the whole list on `stream` and
    /// returns; `deadline` bounds the enqueueing itself. AVG is SUM, then
    /// a division by the communicator's size on the GPU.
    virtual void allreduce(std::span<const ddp_tensor> /*tensors*/, ddp_op, void* /*stream*/, Clock::time_point) {
        lacks(name(), DataOp::allreduce);
    }
    virtual void reduce(std::span<const ddp_tensor> /*tensors*/, ddp_op, int /*root*/, void* /*stream*/,
                        Clock::time_point) {
        lacks(name(), DataOp::reduce);
    }
    virtual void broadcast(std::span<const ddp_tensor> /*tensors*/, int /*root*/, void* /*stream*/,
                           Clock::time_point) {
        lacks(name(), DataOp::broadcast);
    }
    /// outputs[i] gets every rank's inputs[i], in rank order.
    virtual void allgather(std::span<const ddp_tensor> /*inputs*/, std::span<const ddp_tensor> /*outputs*/,
                           void* /*stream*/, Clock::time_point) {
        lacks(name(), DataOp::allgather);
    }
    /// outputs[i] gets this rank's shard of the reduction of inputs[i].
    virtual void reduce_scatter(std::span<const ddp_tensor> /*inputs*/, std::span<const ddp_tensor> /*outputs*/,
                                ddp_op, void* /*stream*/, Clock::time_point) {
        lacks(name(), DataOp::reduce_scatter);
    }
    /// This rank's sends and receives of device memory (planes/exchange.hpp).
    virtual void exchange(const Exchange& /*exchange*/, void* /*stream*/, Clock::time_point) {
        lacks(name(), DataOp::exchange);
    }

    /// Hands the work enqueued on `stream` so far to the watchdog, which
    /// holds it to `deadline` (naming it `what` in errors) and calls `end`
    /// when it finishes or fails. Returns the event that marks its end.
    virtual std::shared_ptr<cuda::Event> watch(void* stream, Clock::time_point deadline, std::string what,
                                               WorkEnd end) = 0;

    /// Where the watchdog reports a failure (a timeout, an NCCL error)
    /// after aborting NCCL: the communicator's control plane, which breaks
    /// the communicator and tells the peers.
    virtual void on_failure(std::function<void(ddp_status, const std::string&)> report) = 0;

    /// The communicator broke on this rank (a timeout, an abort): stops the
    /// GPU work in flight, so that no kernel waits for ever for peers that
    /// will not come.
    virtual void stop_work() = 0;

    /// This plane over the ranks passing the same `color` and `key` as to
    /// the split of its transport that gave `sub` (nullptr, as the result:
    /// this rank is in no part). Collective over this plane's ranks.
    virtual std::unique_ptr<DevicePlane> split(int color, int key, ControlChannel* sub, Clock::time_point deadline) = 0;

    /// Finishes or stops the work in flight and releases the plane, before
    /// its transport goes (`peers_present` as Transport::finalize).
    virtual void finalize(bool peers_present) = 0;
};

}  // namespace ddp
