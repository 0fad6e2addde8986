#include "api/collective_call.hpp"

#include <cmath>
#include <string>

#include "api/options.hpp"
#include "api/validate.hpp"
#include "device/cuda/cuda.hpp"

namespace ddp {

namespace {

/// What a call's tensor list is called in its messages.
const char* list_name(CollectiveKind kind) {
    switch (kind) {
    case CollectiveKind::sync_optimizer_state: return "leaves";
    case CollectiveKind::reducer_create: return "gradients";
    case CollectiveKind::allgather:
    case CollectiveKind::reduce_scatter: return "inputs";
    default: return "tensors";
    }
}

}  // namespace

CallOptions checked_call_options(const ddp_collective_options* opts, const Communicator& comm) {
    const ddp_collective_options read = read_options(opts, default_collective_options(), "opts");
    if (read.fusion_bytes < -1)
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->fusion_bytes is " + std::to_string(read.fusion_bytes) +
                                           "; it must be -1 (no fusion), 0 (default) or a byte count");
    if (!(read.timeout_s >= 0) || std::isinf(read.timeout_s))
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->timeout_s must be a finite number >= 0 (0: the communicator's)");
    const Settings& settings = comm.settings();
    const int64_t fusion_bytes = read.fusion_bytes != 0      ? read.fusion_bytes
                                 : settings.autotune_buckets ? 0
                                                             : settings.fusion_bytes;
    return {fusion_bytes, read.timeout_s, read.cuda_stream, read.names, read.for_binding != 0};
}

void complete_call(CollectiveCall& call, CollectiveKind kind, const CallOptions& options, const Communicator& comm) {
    call.kind = kind;
    call.timeout_s = options.timeout_s;
    call.for_binding = options.for_binding;
    call.on_device = checked_list_place(call.tensors, list_name(kind), comm.gpu());
    if (!call.outputs.empty()) checked_list_place(call.outputs, "outputs", comm.gpu());  // as the inputs' (checked_outputs)
    if (options.names != nullptr) call.names = std::span(options.names, call.tensors.size());
    if (call.on_device) {
        cuda::check_stream(options.cuda_stream);
        call.stream = options.cuda_stream;
    }
}

std::span<const ddp_tensor> checked_writable_list(const ddp_tensor* tensors, int64_t n, const char* what) {
    const auto list = checked_tensor_list(tensors, n, what);
    check_no_overlap(list, what);
    return list;
}

}  // namespace ddp
