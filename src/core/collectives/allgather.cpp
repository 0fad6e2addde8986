// allgather: every rank's inputs[i], in rank order, into every rank's
// outputs[i] (the parameter half of ZeRO and FSDP). A lone tensor goes
// straight from its input into its output; the members of a fused step are
// packed into this rank's block of one gathered bucket and unpacked from it.
// The steps run in the one step loop (core/plan_runner.hpp).
#include <cstring>

#include "core/collectives/collective_rules.hpp"
#include "core/collectives/rank_blocks.hpp"
#include "core/data_steps.hpp"
#include "core/plan_runner.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

class AllgatherSteps final : public PlanSteps {
public:
    AllgatherSteps(const Communicator& comm, const FusionPlan& plan, const CollectiveCall& call)
        : rank_(comm.rank()), ranks_(comm.size()), plan_(plan), call_(call) {}

    DataOp op() const override { return DataOp::allgather; }
    // Every rank's block of the step.
    size_t bucket_bytes(const PlanStep& step) const override {
        return static_cast<size_t>(step_bytes(step)) * static_cast<size_t>(ranks_);
    }
    // Copies each member's input into this rank's block of the bucket: the
    // gather then runs in place and every rank's block arrives beside it.
    void pack(const PlanStep& step, std::byte* bucket) const override {
        std::byte* block = own_block(step, bucket);
        for (int64_t index : plan_.members_of(step)) {
            const ddp_tensor& input = call_.tensors[static_cast<size_t>(index)];
            std::memcpy(block, input.data, byte_size(input));
            block += byte_size(input);
        }
    }
    std::unique_ptr<Pending> start(HostPlane& plane, const PlanStep& step, Place place,
                                   std::byte* bucket) const override {
        if (place == Place::bucket) return plane.start_allgather(own_block(step, bucket), bucket, step.elements, step.dtype);
        const auto member = static_cast<size_t>(plan_.members_of(step)[0]);
        return plane.start_allgather(call_.tensors[member].data, call_.outputs[member].data, step.elements,
                                     step.dtype);
    }
    const char* after(Place place) const override { return place == Place::bucket ? "unpack" : nullptr; }
    // Copies every rank's block of the bucket into the members' outputs,
    // each at that rank's place.
    void unpack(const PlanStep& step, Place, const std::byte* bucket) const override {
        unpack_rank_blocks(plan_, step, call_.outputs, ranks_, bucket);
    }

private:
    std::byte* own_block(const PlanStep& step, std::byte* bucket) const {
        return bucket + static_cast<size_t>(step_bytes(step)) * static_cast<size_t>(rank_);
    }

    int rank_, ranks_;
    const FusionPlan& plan_;
    const CollectiveCall& call_;
};

void allgather_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    run_plan(comm, context, plan, call, AllgatherSteps(comm, plan, call));
}

void allgather_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                         void* stream) {
    plane.allgather(call.tensors, call.outputs, stream, context.deadline);
}

}  // namespace

extern const CollectiveRules allgather_rules{
    .takes = {.list_name = "inputs", .writes_list = false, .outputs = Sharding::gather},
    .host = allgather_on_host,
    .device_op = DataOp::allgather,
    .device = allgather_on_device,
    .crossing = both_ways,
};

}  // namespace ddp
