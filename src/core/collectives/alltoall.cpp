// alltoall: block j of every rank's inputs[i] to rank j, which finds block r
// from rank r at block r of its outputs[i] (the token exchange of
// mixture-of-experts layers; torch's all_to_all_single, MPI_Alltoall),
// written once over the planes' point-to-point exchange: no plane knows it.
// A lone tensor goes straight from its input into its output; the members
// of a fused step are laid out destination block by destination block in
// one bucket, whose exchanged half holds source block by source block. The
// steps run in the one step loop (core/plan_runner.hpp); on a device plane
// the whole list is one exchange.

#include "core/collectives/collective_rules.hpp"
#include "core/collectives/rank_blocks.hpp"
#include "core/data_steps.hpp"
#include "core/plan_runner.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

/// Block j of `send` to rank j, and rank j's block into block j of `recv`.
void add_blocks(Exchange& exchange, const std::byte* send, std::byte* recv, size_t block, int ranks) {
    exchange.largest += block;
    for (int rank = 0; rank < ranks; ++rank) {
        const size_t at = block * static_cast<size_t>(rank);
        exchange.sends.push_back({rank, send + at, block});
        exchange.receives.push_back({rank, recv + at, block});
    }
}

class AlltoallSteps final : public PlanSteps {
public:
    AlltoallSteps(const Communicator& comm, const FusionPlan& plan, const CollectiveCall& call)
        : ranks_(comm.size()), plan_(plan), call_(call) {}

    DataOp op() const override { return DataOp::exchange; }
    // What this rank sends, then what it receives.
    size_t bucket_bytes(const PlanStep& step) const override { return 2 * static_cast<size_t>(step_bytes(step)); }
    // Block j of the bucket holds block j of every member, in member order.
    void pack(const PlanStep& step, std::byte* bucket) const override {
        pack_rank_blocks(plan_, step, call_.tensors, ranks_, bucket);
    }
    std::unique_ptr<Pending> start(HostPlane& plane, const PlanStep& step, Place place,
                                   std::byte* bucket) const override {
        const size_t block = static_cast<size_t>(step_bytes(step)) / static_cast<size_t>(ranks_);
        Exchange exchange;
        if (place == Place::bucket) {
            add_blocks(exchange, bucket, received(step, bucket), block, ranks_);
        } else {
            const auto member = static_cast<size_t>(plan_.members_of(step)[0]);
            add_blocks(exchange, static_cast<const std::byte*>(call_.tensors[member].data),
                       static_cast<std::byte*>(call_.outputs[member].data), block, ranks_);
        }
        return plane.start_exchange(std::move(exchange));
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

void alltoall_on_device(Communicator& comm, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                        void* stream) {
    Exchange exchange;
    const auto ranks = static_cast<size_t>(comm.size());
    for (size_t i = 0; i < call.tensors.size(); ++i)
        if (call.tensors[i].count > 0)
            add_blocks(exchange, static_cast<const std::byte*>(call.tensors[i].data),
                       static_cast<std::byte*>(call.outputs[i].data), byte_size(call.tensors[i]) / ranks, comm.size());
    plane.exchange(exchange, stream, context.deadline);
}

}  // namespace

extern const CollectiveRules alltoall_rules{
    .takes = {.list_name = "inputs", .writes_list = false, .outputs = Sharding::exchange},
    .host = alltoall_on_host,
    .device_op = DataOp::exchange,
    .device = alltoall_on_device,
    .crossing = both_ways,
};

}  // namespace ddp
