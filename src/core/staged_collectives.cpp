// Device buffers over a host data plane (mpi, and nccl's float MIN/MAX):
// copied into one pinned host buffer on the caller's stream (each aligned
// to its element size, so tensors of one dtype lie back to back and fusion
// reduces them in place with no packing), reduced there as host tensors,
// and copied back. MPI is never
// handed device memory (open-mpi/ompi#9845), CUDA-aware or not.
#include <vector>

#include "core/device_collectives.hpp"
#include "device/cuda/cuda.hpp"
#include "trace/timeline.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

/// Which way a rank's bytes cross between device and host for a call.
struct Crossing {
    bool to_host;    ///< the rank's inputs matter
    bool to_device;  ///< the rank receives results
};

Crossing crossing_of(const CollectiveCall& call, int rank) {
    const bool root = rank == call.root;
    switch (call.kind) {
    case CollectiveKind::allreduce: return {true, true};
    case CollectiveKind::reduce: return {true, root};
    case CollectiveKind::broadcast:
    case CollectiveKind::sync_optimizer_state: return {root, !root};
    default: return {true, false};  // check_replicas reads only
    }
}

// Each staged tensor starts at a multiple of its element size, as MPI's
// built-in operations expect; tensors of one dtype stay back to back.
size_t aligned(size_t offset, const ddp_tensor& tensor) {
    const size_t alignment = element_size(dtype_of(tensor));
    return (offset + alignment - 1) / alignment * alignment;
}

}  // namespace

void run_staged(Communicator& comm, CallContext& context, const CollectiveCall& call,
                std::span<const uint64_t> words) {
    std::vector<size_t> offsets;
    size_t total = 0;
    for (const ddp_tensor& tensor : call.tensors) {
        offsets.push_back(aligned(total, tensor));
        total = offsets.back() + byte_size(tensor);
    }
    std::byte* host = comm.staging_buffer(total).data();  // page-aligned: offsets keep their alignment

    std::vector<ddp_tensor> staged(call.tensors.begin(), call.tensors.end());
    for (size_t i = 0; i < staged.size(); ++i) {
        staged[i].data = host + offsets[i];
        staged[i].device_type = DDP_DEVICE_CUDA_HOST;
        staged[i].device_id = 0;
    }

    const Crossing crossing = crossing_of(call, comm.backend().rank());
    if (crossing.to_host) {
        trace::Span span(comm.control().timeline(), "stage to host", trace::Row::work, context.sequence);
        if (span.on()) span.event().bytes = static_cast<int64_t>(total);
        for (size_t i = 0; i < staged.size(); ++i)
            cuda::copy_to_host(staged[i].data, call.tensors[i].data, byte_size(staged[i]), call.stream);
        comm.control().wait(context, cuda::pending_until_done(call.stream), WaitStyle::for_data);
    }
    CollectiveCall on_host = call;
    on_host.tensors = staged;
    on_host.on_device = false;
    run_host_data_phase(comm, context, on_host, words);
    if (crossing.to_device) {
        trace::Span span(comm.control().timeline(), "stage to device", trace::Row::work, context.sequence);
        if (span.on()) span.event().bytes = static_cast<int64_t>(total);
        for (size_t i = 0; i < staged.size(); ++i)
            cuda::copy_to_device(call.tensors[i].data, staged[i].data, byte_size(staged[i]), call.stream);
        // The staging buffer is reused by the next call, from any stream: wait.
        comm.control().wait(context, cuda::pending_until_done(call.stream), WaitStyle::for_data);
    }
}

}  // namespace ddp
