#include "core/device_collectives.hpp"

#include "backend/device_plane.hpp"
#include "device/cuda/cuda.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

bool runs_on_gpu(Communicator& comm, const CollectiveCall& call) {
    DevicePlane* plane = comm.backend().device_plane();
    if (plane == nullptr || !call.on_device) return false;
    switch (call.kind) {
    case CollectiveKind::allreduce:
    case CollectiveKind::reduce:
    case CollectiveKind::reduce_scatter:
        for (const ddp_tensor& tensor : call.tensors)
            if (!plane->reduces(call.op, dtype_of(tensor))) return false;
        return true;
    case CollectiveKind::broadcast:
    case CollectiveKind::sync_optimizer_state:
    case CollectiveKind::allgather: return true;
    default: return false;  // check_replicas hashes on the host
    }
}

namespace {

// Enqueues the call's NCCL work on `stream`.
void enqueue(Communicator& comm, CallContext& context, const CollectiveCall& call, DevicePlane& plane, void* stream) {
    switch (call.kind) {
    case CollectiveKind::allreduce: plane.allreduce(call.tensors, call.op, stream, context.deadline); break;
    case CollectiveKind::reduce: plane.reduce(call.tensors, call.op, call.root, stream, context.deadline); break;
    case CollectiveKind::broadcast: plane.broadcast(call.tensors, call.root, stream, context.deadline); break;
    case CollectiveKind::allgather: plane.allgather(call.tensors, call.outputs, stream, context.deadline); break;
    case CollectiveKind::reduce_scatter:
        plane.reduce_scatter(call.tensors, call.outputs, call.op, stream, context.deadline);
        break;
    case CollectiveKind::sync_optimizer_state:
        plane.broadcast(call.tensors, call.root, stream, context.deadline);
        broadcast_scalars(comm, context, call);
        break;
    default: break;
    }
}

}  // namespace

void run_device_data_phase(Communicator& comm, CallContext& context, const CollectiveCall& call,
                           std::span<const uint64_t> words) {
    const cuda::DeviceScope on_device(comm.device());  // the caller's thread may have another device current
    if (!runs_on_gpu(comm, call)) return run_staged(comm, context, call, words);
    DevicePlane& plane = *comm.backend().device_plane();
    // The per-thread default stream names another stream on NCCL's own
    // threads: the work goes on libddp's stream, joined to the caller's by
    // an event each way.
    const bool joined = cuda::is_per_thread(call.stream);
    void* stream = joined ? comm.own_stream() : call.stream;
    if (joined) {
        cuda::Event reached;
        reached.record(call.stream);
        reached.make_wait(stream);
    }
    try {
        enqueue(comm, context, call, plane, stream);
    } catch (const Error& error) {
        // NCCL may hold part of the call: this rank cannot go on, and its peers must not wait.
        comm.control().break_from_device(error.status(), error.what(), true);
        throw;
    }
    const std::shared_ptr<GpuRequest> request = call.gpu_request;
    WorkEnd end = [request](ddp_status status, const std::string& message) {
        if (request) request->state->complete(status, message);
    };
    auto event = plane.watch(stream, context.deadline, call_name(static_cast<uint64_t>(call.kind), context.sequence),
                             std::move(end));
    if (joined) event->make_wait(call.stream);
    if (request) request->event = std::move(event);
}

}  // namespace ddp
