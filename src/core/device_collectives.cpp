#include "core/device_collectives.hpp"

#include "core/collectives/collective_rules.hpp"
#include "core/fusion_plan.hpp"
#include "device/cuda/cuda.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

bool runs_on_gpu(Communicator& comm, const CollectiveCall& call) {
    if (!call.on_device) return false;
    const CollectiveRules& rules = rules_for(call.kind);
    return rules.device != nullptr && comm.planes().device_for(rules.device_op, call.tensors, call.op) != nullptr;
}

void run_device_data_phase(Communicator& comm, CallContext& context, const CollectiveCall& call,
                           std::span<const uint64_t> words, bool one_region) {
    const cuda::DeviceScope on_device(comm.device());  // the caller's thread may have another device current
    if (!runs_on_gpu(comm, call)) return run_staged(comm, context, call, words);
    DevicePlane& plane = *comm.planes().device();
    // The per-thread default stream names another stream on NCCL's own
    // threads: the work goes on libddp's stream, joined to the caller's by
    // an event each way. Ranks that are threads of one process may share a
    // GPU and so the caller's stream, where one rank's kernel would wait
    // behind its peer's for ever: each runs on its own stream, and its call
    // ends once the GPU is done (a host wait, held to the deadline).
    const bool in_process = comm.transport().ranks_are_threads();
    const bool joined = in_process || cuda::is_per_thread(call.stream);
    void* stream = joined ? comm.memory().own_stream() : call.stream;
    if (joined) {
        cuda::Event reached;
        reached.record(call.stream);
        reached.make_wait(stream);
    }
    // Views of one buffer on every rank: one NCCL call over the buffer. Only
    // what every rank agreed on may shape the calls, never a rank's own layout.
    const ddp_tensor region = one_region ? one_region_tensor(call.tensors) : ddp_tensor{};
    CollectiveCall as_one = call;
    if (one_region) as_one.tensors = std::span(&region, 1);
    try {
        rules_for(call.kind).device(comm, context, as_one, plane, stream);
    } catch (const Error& error) {
        // NCCL may hold part of the call: this rank cannot go on, and its peers must not wait.
        comm.control().break_from_device(error.status(), error.what(), true);
        throw;
    }
    const std::shared_ptr<Request> request = call.gpu_request;
    WorkEnd end = [request](ddp_status status, const std::string& message) {
        if (request) request->state->complete(status, message);
    };
    auto event = plane.watch(stream, context.deadline, call_name(static_cast<uint64_t>(call.kind), context.label),
                             std::move(end));
    if (in_process)
        comm.control().wait(context, cuda::pending_until_done(stream), WaitStyle::for_data);
    else if (joined)
        event->make_wait(call.stream);
    if (request) request->event = std::move(event);
}

}  // namespace ddp
