#include "api/collective_call.hpp"

#include <string>

#include "api/options.hpp"
#include "api/validate.hpp"
#include "core/collectives/collective_rules.hpp"
#include "device/cuda/cuda.hpp"
#include "util/timeout.hpp"

namespace ddp {

CallOptions checked_call_options(const ddp_collective_options* opts, const Communicator& comm) {
    const ddp_collective_options read = read_options(opts, default_collective_options(), "opts");
    if (read.fusion_bytes < -1)
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->fusion_bytes is " + std::to_string(read.fusion_bytes) +
                                           "; it must be -1 (no fusion), 0 (default) or a byte count");
    check_timeout(read.timeout_s, "opts->timeout_s", "the communicator's");
    const Settings& settings = comm.settings();
    const int64_t fusion_bytes = read.fusion_bytes != 0      ? read.fusion_bytes
                                 : settings.autotune_buckets ? 0
                                                             : settings.fusion_bytes;
    return {fusion_bytes, read.timeout_s, read.cuda_stream, read.names, read.for_binding != 0};
}

CollectiveCall checked_call(const Communicator& comm, CollectiveKind kind, const EntryArguments& arguments,
                            const CallOptions& options) {
    const CollectiveRules& rules = rules_for(kind);
    const Takes& takes = rules.takes;
    CollectiveCall call;
    call.tensors = checked_tensor_list(arguments.tensors, arguments.n, takes.list_name);
    if (takes.writes_list) check_no_overlap(call.tensors, takes.list_name);
    if (takes.outputs != Sharding::none)
        call.outputs = checked_outputs(call.tensors, arguments.outputs, takes.outputs, comm.channel().size(),
                                       comm.channel().rank(), kind_name(static_cast<uint64_t>(kind)));
    if (takes.op) call.op = checked_op(arguments.op, call.tensors);
    if (takes.root) call.root = checked_root(arguments.root, comm.channel().size());
    if (takes.scalars) {
        if (arguments.n_scalars < 0)
            fail(DDP_ERR_INVALID_ARGUMENT, "n_scalars is " + std::to_string(arguments.n_scalars) + "; it must be >= 0");
        if (arguments.n_scalars > 0 && arguments.scalars == nullptr)
            fail(DDP_ERR_INVALID_ARGUMENT, "scalars is NULL but n_scalars is " + std::to_string(arguments.n_scalars));
        call.scalars = std::span(arguments.scalars, static_cast<size_t>(arguments.n_scalars));
    }
    if (rules.planned) call.fusion_bytes = options.fusion_bytes;  // agreed: only where a plan uses it
    return call;
}

void complete_call(CollectiveCall& call, CollectiveKind kind, const CallOptions& options, const Communicator& comm,
                   const char* list_name) {
    call.kind = kind;
    call.timeout_s = options.timeout_s;
    call.for_binding = options.for_binding;
    call.on_device = checked_list_place(call.tensors, list_name, comm.gpu());
    if (!call.outputs.empty()) checked_list_place(call.outputs, "outputs", comm.gpu());  // as the inputs' (checked_outputs)
    if (options.names != nullptr) call.names = std::span(options.names, call.tensors.size());
    if (call.on_device) {
        cuda::check_stream(options.cuda_stream);
        call.stream = options.cuda_stream;
    }
}

}  // namespace ddp
