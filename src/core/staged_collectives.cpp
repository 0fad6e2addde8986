// Device buffers over the host data planes (mpi, and nccl's float MIN/MAX):
// copied into one pinned host buffer on the caller's stream (each aligned
// to its element size, so tensors of one dtype lie back to back and fusion
// reduces them in place with no packing), reduced there as host tensors,
// and copied back (into the outputs, for allgather and reduce_scatter). MPI is never
// handed device memory (open-mpi/ompi#9845), CUDA-aware or not.
#include <vector>

#include "core/collectives/collective_rules.hpp"
#include "core/device_collectives.hpp"
#include "device/cuda/cuda.hpp"
#include "trace/timeline.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

// Each staged tensor starts at a multiple of its element size, as MPI's
// built-in operations expect; tensors of one dtype stay back to back.
size_t aligned(size_t offset, const ddp_tensor& tensor) {
    const size_t alignment = element_size(dtype_of(tensor));
    return (offset + alignment - 1) / alignment * alignment;
}

// Where each of `tensors` lies in the staging buffer, from `total` on
// (which it advances): host copies of the tensors, at `host` + offset.
std::vector<ddp_tensor> laid_out(std::span<const ddp_tensor> tensors, size_t& total, std::vector<size_t>& offsets) {
    std::vector<ddp_tensor> staged(tensors.begin(), tensors.end());
    for (ddp_tensor& tensor : staged) {
        offsets.push_back(aligned(total, tensor));
        total = offsets.back() + byte_size(tensor);
        tensor.device_type = DDP_DEVICE_CUDA_HOST;
        tensor.device_id = 0;
    }
    return staged;
}

}  // namespace

void run_staged(Communicator& comm, CallContext& context, const CollectiveCall& call,
                std::span<const uint64_t> words) {
    // The inputs, then (allgather, reduce_scatter) the outputs.
    size_t total = 0;
    std::vector<size_t> offsets;
    std::vector<ddp_tensor> staged = laid_out(call.tensors, total, offsets);
    std::vector<ddp_tensor> staged_outputs = laid_out(call.outputs, total, offsets);
    std::byte* host = comm.memory().staging_buffer(total).data();  // page-aligned: offsets keep their alignment
    size_t next = 0;
    for (ddp_tensor& tensor : staged) tensor.data = host + offsets[next++];
    for (ddp_tensor& tensor : staged_outputs) tensor.data = host + offsets[next++];

    const Crossing crossing = rules_for(call.kind).crossing(call, comm.rank());
    if (crossing.to_host) {
        trace::Span span(comm.trace().timeline, "stage to host", trace::Row::work, context.sequence);
        if (span.on()) span.event().bytes = static_cast<int64_t>(total);
        for (size_t i = 0; i < staged.size(); ++i)
            cuda::copy_to_host(staged[i].data, call.tensors[i].data, byte_size(staged[i]), call.stream);
        comm.control().wait(context, cuda::pending_until_done(call.stream), WaitStyle::for_data);
    }
    CollectiveCall on_host = call;
    on_host.tensors = staged;
    on_host.outputs = staged_outputs;
    on_host.on_device = false;
    // Staged tensors of one dtype lie back to back, alike on every rank.
    run_host_data_phase(comm, context, on_host, words, lies_in_one_region(staged) && staged_outputs.empty());
    if (crossing.to_device) {
        trace::Span span(comm.trace().timeline, "stage to device", trace::Row::work, context.sequence);
        if (span.on()) span.event().bytes = static_cast<int64_t>(total);
        // The results: the outputs where the call has them, else the tensors themselves.
        const bool into_outputs = !call.outputs.empty();
        const std::span<const ddp_tensor> results = into_outputs ? call.outputs : call.tensors;
        const std::vector<ddp_tensor>& staged_results = into_outputs ? staged_outputs : staged;
        for (size_t i = 0; i < results.size(); ++i)
            cuda::copy_to_device(results[i].data, staged_results[i].data, byte_size(staged_results[i]), call.stream);
        // The staging buffer is reused by the next call, from any stream: wait.
        comm.control().wait(context, cuda::pending_until_done(call.stream), WaitStyle::for_data);
    }
}

}  // namespace ddp
