#include "collectives.hpp"

#include <cstring>

#include "agreement.hpp"
#include "dtype.hpp"
#include "elementwise.hpp"
#include "env.hpp"
#include "hash.hpp"

namespace ddp {

namespace {

size_t byte_size(const ddp_tensor& tensor) {
    return static_cast<size_t>(tensor.count) * element_size(dtype_of(tensor));
}

// Copies the members of a fused step into the bucket, back to back.
void pack(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors,
          std::byte* bucket) {
    for (int64_t index : plan.members_of(step)) {
        const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
        std::memcpy(bucket, tensor.data, byte_size(tensor));
        bucket += byte_size(tensor);
    }
}

// Copies the bucket back into the members, dividing by `divisor` for AVG.
void unpack(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors,
            const std::byte* bucket, double divisor) {
    for (int64_t index : plan.members_of(step)) {
        const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
        if (divisor != 1.0)
            divide_copy(tensor.data, bucket, tensor.count, dtype_of(tensor), divisor);
        else
            std::memcpy(tensor.data, bucket, byte_size(tensor));
        bucket += byte_size(tensor);
    }
}

// Whether this rank's members of a fused step already lie back to back in
// memory (views into one flat gradient buffer, as ComponentArrays or a
// destructured model give): then the step runs on them in place, with no
// packing. Only the buffer differs between ranks, never the MPI call, so ranks
// with different memory layouts still issue the same operations.
const std::byte* contiguous_members(const FusionPlan& plan, const PlanStep& step,
                                    std::span<const ddp_tensor> tensors) {
    const auto members = plan.members_of(step);
    const auto* start = static_cast<const std::byte*>(tensors[static_cast<size_t>(members[0])].data);
    const std::byte* next = start;
    for (int64_t index : members) {
        const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
        if (byte_size(tensor) == 0) continue;
        if (tensor.data != next) return nullptr;
        next += byte_size(tensor);
    }
    return start;
}

// Runs `step_call(data, elements, dtype)` for every plan step: on the tensor
// itself for single tensors and for members already contiguous in memory,
// else on the bucket (packing before when `pack_before`, unpacking after when
// `unpack_after`).
template <typename StepCall>
void run_plan(Communicator& comm, const FusionPlan& plan, std::span<const ddp_tensor> tensors,
              bool pack_before, bool unpack_after, double divisor, StepCall step_call) {
    std::byte* bucket = comm.fusion_buffer(static_cast<size_t>(plan.largest_bucket_bytes)).data();
    for (const PlanStep& step : plan.steps) {
        if (step.fused) {
            if (const std::byte* in_place = contiguous_members(plan, step, tensors)) {
                auto* data = const_cast<std::byte*>(in_place);  // the caller's own, writable
                step_call(static_cast<void*>(data), step.elements, step.dtype);
                if (unpack_after && divisor != 1.0)
                    divide_copy(data, data, step.elements, step.dtype, divisor);
                continue;
            }
            if (pack_before) pack(plan, step, tensors, bucket);
            step_call(static_cast<void*>(bucket), step.elements, step.dtype);
            if (unpack_after) unpack(plan, step, tensors, bucket, divisor);
        } else {
            const ddp_tensor& tensor = tensors[static_cast<size_t>(plan.members_of(step)[0])];
            step_call(tensor.data, tensor.count, dtype_of(tensor));
            if (unpack_after && divisor != 1.0)
                divide_copy(tensor.data, tensor.data, tensor.count, dtype_of(tensor), divisor);
        }
    }
}

ddp_op transport_op(ddp_op op) { return op == DDP_OP_AVG ? DDP_OP_SUM : op; }

double avg_divisor(const Communicator& comm, ddp_op op) {
    return op == DDP_OP_AVG ? static_cast<double>(comm.transport().size()) : 1.0;
}

}  // namespace

int64_t effective_fusion_bytes(int64_t from_options) {
    if (from_options != 0) return from_options;
    return env_bytes("DDP_FUSION_BYTES").value_or(default_fusion_bytes);
}

namespace {

// Agrees on the call, then returns its fusion plan, or nullptr on one rank
// (where every collective leaves the data as it is).
const FusionPlan* agree_and_plan(Communicator& comm, const CallDescription& call) {
    const uint64_t key = agree(comm.transport(), call, comm.deadline());
    if (comm.transport().size() == 1) return nullptr;
    return &comm.plan(key, call.tensors, policy_for_bucket_bytes(call.fusion_bytes));
}

// Root's tensors to every rank, fused as the plan says.
void broadcast_planned(Communicator& comm, const FusionPlan& plan, std::span<const ddp_tensor> tensors,
                       int root) {
    Transport& transport = comm.transport();
    const bool is_root = transport.rank() == root;
    run_plan(comm, plan, tensors, is_root, !is_root, 1.0, [&](void* data, int64_t count, ddp_dtype dtype) {
        transport.broadcast(data, count * static_cast<int64_t>(element_size(dtype)), root);
    });
}

}  // namespace

void allreduce_list(Communicator& comm, std::span<const ddp_tensor> tensors, ddp_op op,
                    int64_t fusion_bytes) {
    const FusionPlan* plan =
        agree_and_plan(comm, {CollectiveKind::allreduce, op, 0, fusion_bytes, 0, tensors});
    if (plan == nullptr) return;
    Transport& transport = comm.transport();
    run_plan(comm, *plan, tensors, true, true, avg_divisor(comm, op),
             [&](void* data, int64_t count, ddp_dtype dtype) {
                 transport.allreduce(data, count, dtype, transport_op(op));
             });
}

void broadcast_list(Communicator& comm, std::span<const ddp_tensor> tensors, int root) {
    const FusionPlan* plan = agree_and_plan(
        comm, {CollectiveKind::broadcast, DDP_OP_SUM, root, effective_fusion_bytes(0), 0, tensors});
    if (plan != nullptr) broadcast_planned(comm, *plan, tensors, root);
}

void reduce_list(Communicator& comm, std::span<const ddp_tensor> tensors, ddp_op op, int root) {
    const FusionPlan* plan =
        agree_and_plan(comm, {CollectiveKind::reduce, op, root, effective_fusion_bytes(0), 0, tensors});
    if (plan == nullptr) return;
    Transport& transport = comm.transport();
    const bool is_root = transport.rank() == root;
    run_plan(comm, *plan, tensors, true, is_root, avg_divisor(comm, op),
             [&](void* data, int64_t count, ddp_dtype dtype) {
                 transport.reduce(data, count, dtype, transport_op(op), root);
             });
}

void sync_optimizer_state(Communicator& comm, std::span<const ddp_tensor> leaves,
                          std::span<double> scalars, int root) {
    const auto n_scalars = static_cast<int64_t>(scalars.size());
    const FusionPlan* plan = agree_and_plan(comm, {CollectiveKind::sync_optimizer_state, DDP_OP_SUM, root,
                                                   effective_fusion_bytes(0), n_scalars, leaves});
    if (plan == nullptr) return;
    broadcast_planned(comm, *plan, leaves, root);
    if (!scalars.empty())
        comm.transport().broadcast(scalars.data(), n_scalars * static_cast<int64_t>(sizeof(double)), root);
}

bool check_replicas(Communicator& comm, std::span<const ddp_tensor> tensors, std::string& difference) {
    Transport& transport = comm.transport();
    agree(transport, CallDescription{CollectiveKind::check_replicas, DDP_OP_SUM, 0, 0, 0, tensors},
          comm.deadline());
    // (max hash, ~min hash) per tensor: equal on every rank iff max == min.
    std::vector<uint64_t> extremes(2 * tensors.size());
    std::vector<uint64_t> hashes(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        hashes[i] = hash_bytes(tensors[i].data, byte_size(tensors[i]));
        extremes[2 * i] = hashes[i];
        extremes[2 * i + 1] = ~hashes[i];
    }
    transport.max_u64(extremes, comm.deadline());
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (extremes[2 * i] == ~extremes[2 * i + 1]) continue;
        const uint64_t mine = hashes[i];
        const auto all = transport.allgather_u64(std::span(&mine, 1));
        size_t other = 1;
        while (other < all.size() && all[other][0] == all[0][0]) ++other;
        difference = "check_replicas: tensor " + std::to_string(i) + " (" +
                     dtype_name(tensors[i].dtype) + "[" + std::to_string(tensors[i].count) +
                     "]) differs between rank 0 and rank " + std::to_string(other);
        return false;
    }
    return true;
}

void barrier(Communicator& comm) {
    // Agreement needs every rank's contribution, so it is itself a barrier.
    agree(comm.transport(), CallDescription{CollectiveKind::barrier, DDP_OP_SUM, 0, 0, 0, {}}, comm.deadline());
}

}  // namespace ddp
