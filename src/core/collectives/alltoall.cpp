// alltoall: block j of every rank's inputs[i] to rank j, which finds block r
// from rank r at block r of its outputs[i] (the token exchange of
// mixture-of-experts layers; torch's all_to_all_single, MPI_Alltoall). A
// lone tensor goes straight from its input into its output; the members of
// a fused step are laid out destination block by destination block in one
// bucket, whose exchanged half holds source block by source block. The
// steps run in the one step loop (core/plan_runner.hpp).

#include "core/collectives/collective_rules.hpp"
#include "core/collectives/rank_blocks.hpp"
#include "core/data_steps.hpp"
#include "core/plan_runner.hpp"

namespace ddp {

namespace {

class AlltoallSteps final : public PlanSteps {
public:
    AlltoallSteps(const Communicator& comm, const FusionPlan& plan, const CollectiveCall& call)
        : ranks_(comm.size()), plan_(plan), call_(call) {}

    DataOp op() const override { return DataOp::alltoall; }
    // What this rank sends, then what it receives.
    size_t bucket_bytes(const PlanStep& step) const override { return 2 * static_cast<size_t>(step_bytes(step)); }
    // Block j of the bucket holds block j of every member, in member order.
    void pack(const PlanStep& step, std::byte* bucket) const override {
        pack_rank_blocks(plan_, step, call_.tensors, ranks_, bucket);
    }
    std::unique_ptr<Pending> start(HostPlane& plane, const PlanStep& step, Place place,
                                   std::byte* bucket) const override {
        const int64_t block_elements = step.elements / ranks_;
        if (place == Place::bucket)
            return plane.start_alltoall(bucket, received(step, bucket), block_elements, step.dtype);
        const auto member = static_cast<size_t>(plan_.members_of(step)[0]);
        return plane.start_alltoall(call_.tensors[member].data, call_.outputs[member].data, block_elements,
                                    step.dtype);
    }
    const char* after(Place place) const override { return place == Place::bucket ? "unpack" : nullptr; }
    // Block r of the received half holds rank r's block of every member.
    void unpack(const PlanStep& step, Place, const std::byte* bucket) const override {
        unpack_rank_blocks(plan_, step, call_.outputs, ranks_, received(step, bucket));
    }

private:
    template <typename Byte>
    Byte* received(const PlanStep& step, Byte* bucket) const {
        return bucket + step_bytes(step);
    }

    int ranks_;
    const FusionPlan& plan_;
    const CollectiveCall& call_;
};

void alltoall_on_host(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan) {
    run_plan(comm, context, plan, call, AlltoallSteps(comm, plan, call));
}

void alltoall_on_device(Communicator&, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                        void* stream) {
    plane.alltoall(call.tensors, call.outputs, stream, context.deadline);
}

}  // namespace

extern const CollectiveRules alltoall_rules{
    .takes = {.list_name = "inputs", .writes_list = false, .outputs = Sharding::exchange},
    .host = alltoall_on_host,
    .device_op = DataOp::alltoall,
    .device = alltoall_on_device,
    .crossing = both_ways,
};

}  // namespace ddp
