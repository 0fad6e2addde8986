// reduce_scatter: every rank's inputs[i] reduced, and shard r of the result
// into rank r's outputs[i] (the gradient half of ZeRO and FSDP). A lone
// tensor goes straight from its input into its output; the members of a
// fused step are laid out rank block by rank block in one bucket. The steps
// run in the one step loop (core/plan_runner.hpp).
#include <cstring>

#include "core/collectives/collective_rules.hpp"
#include "core/collectives/rank_blocks.hpp"
#include "core/data_steps.hpp"
#include "core/plan_runner.hpp"
#include "device/cpu/elementwise.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

class ReduceScatterSteps final : public PlanSteps {
public:
    ReduceScatterSteps(Communicator& comm, const FusionPlan& plan, const CollectiveCall& call)
        : ranks_(comm.size()), divisor_(avg_divisor(comm, call.op)), plan_(plan), call_(call) {}

    DataOp op() const override { return DataOp::reduce_scatter; }
    ddp_op reduction() const override { return plane_op(call_.op); }
    // Every rank's blocks, then this rank's reduced block.
    size_t bucket_bytes(const PlanStep& step) const override {
        const auto bytes = static_cast<size_t>(step_bytes(step));
        return bytes + bytes / static_cast<size_t>(ranks_);
    }
    // Lays the members' inputs out rank block by rank block: block r holds
    // shard r of every member, in member order.
    void pack(const PlanStep& step, std::byte* bucket) const override {
        pack_rank_blocks(plan_, step, call_.tensors, ranks_, bucket);
    }
    std::unique_ptr<Pending> start(HostPlane& plane, const PlanStep& step, Place place,
                                   std::byte* bucket) const override {
        const int64_t shard_elements = step.elements / ranks_;
        if (place == Place::bucket)
            return plane.start_reduce_scatter(bucket, own_block(step, bucket), shard_elements, step.dtype,
                                              reduction());
        const auto member = static_cast<size_t>(plan_.members_of(step)[0]);
        return plane.start_reduce_scatter(call_.tensors[member].data, call_.outputs[member].data, shard_elements,
                                          step.dtype, reduction());
    }
    const char* after(Place place) const override {
        if (place == Place::bucket) return divisor_ != 1.0 ? "unpack + divide" : "unpack";
        return divisor_ != 1.0 ? "divide" : nullptr;
    }
    // Copies this rank's reduced block into the members' outputs (a lone
    // tensor's output is only divided).
    void unpack(const PlanStep& step, Place place, const std::byte* bucket) const override {
        const std::byte* block = place == Place::bucket ? own_block(step, bucket) : nullptr;
        for (int64_t index : plan_.members_of(step)) {
            const ddp_tensor& output = call_.outputs[static_cast<size_t>(index)];
            const void* from = block != nullptr ? static_cast<const void*>(block) : output.data;
            if (divisor_ != 1.0)
                divide_copy(output.data, from, output.count, dtype_of(output), divisor_);
            else
                std::memcpy(output.data, from, byte_size(output));
            if (block != nullptr) block += byte_size(output);
        }
    }

private:
    template <typename Byte>
    Byte* own_block(const PlanStep& step, Byte* bucket) const {
        return bucket + step_bytes(step);
    }

    int ranks_;
    double divisor_;
    const FusionPlan& plan_;
    const CollectiveCall& call_;
};

void reduce_scatter_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call,
                            const FusionPlan& plan) {
    run_plan(comm, context, plan, call, ReduceScatterSteps(comm, plan, call));
}

void reduce_scatter_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                              void* stream) {
    plane.reduce_scatter(call.tensors, call.outputs, call.op, stream, context.deadline);
}

}  // namespace

extern const CollectiveRules reduce_scatter_rules{
    .takes = {.list_name = "inputs", .writes_list = false, .outputs = Sharding::scatter, .op = true},
    .host = reduce_scatter_on_host,
    .device_op = DataOp::reduce_scatter,
    .device = reduce_scatter_on_device,
    .crossing = both_ways,
};

}  // namespace ddp
