#include "core/data_steps.hpp"

#include "util/dtype.hpp"

namespace ddp {

namespace {

/// An operation together with the memory it writes into, which lives as
/// long as the operation does.
class HoldingMemory final : public Pending {
public:
    HoldingMemory(std::unique_ptr<Pending> operation, std::shared_ptr<void> memory)
        : memory_(std::move(memory)), operation_(std::move(operation)) {}
    bool test() override { return operation_->test(); }

private:
    std::shared_ptr<void> memory_;
    std::unique_ptr<Pending> operation_;  // declared last: goes before its memory
};

}  // namespace

int64_t step_bytes(const PlanStep& step) { return step.elements * static_cast<int64_t>(element_size(step.dtype)); }

void describe_step(trace::Span& span, const FusionPlan& plan, const PlanStep& step, size_t index,
                   const CollectiveCall& call) {
    if (!span.on()) return;
    span.event().bytes = step_bytes(step);
    span.event().index = static_cast<int64_t>(index);
    if (!call.names.empty()) span.event().names = trace::names_json(call.names, plan.members_of(step));
}

void record_transfer(Communicator& comm, const CallContext& context, const FusionPlan& plan, size_t index,
                     const CollectiveCall& call, int64_t started_ns, const char* plane) {
    trace::Timeline& timeline = comm.control().timeline();
    if (!timeline.on()) return;
    const PlanStep& step = plan.steps[index];
    trace::Event transfer;
    transfer.name = "transfer";
    transfer.tid = trace::thread_row(trace::Row::transfer, static_cast<int>(index % 2));
    transfer.ts_ns = started_ns;
    transfer.dur_ns = trace::now_ns() - started_ns;
    transfer.sequence = context.sequence;
    transfer.bytes = step_bytes(step);
    transfer.index = static_cast<int64_t>(index);
    transfer.plane = plane;
    if (!call.names.empty()) transfer.names = trace::names_json(call.names, plan.members_of(step));
    timeline.record(std::move(transfer));
}

double avg_divisor(Communicator& comm, ddp_op op) {
    return op == DDP_OP_AVG ? static_cast<double>(comm.size()) : 1.0;
}

std::unique_ptr<Pending> start_allreduce_step(Communicator& comm, void* data, int64_t count, ddp_dtype dtype,
                                              ddp_op op, std::shared_ptr<void> memory, const char** plane_name) {
    const int64_t bytes = count * static_cast<int64_t>(element_size(dtype));
    HostPlane& plane = comm.planes().host_for(DataOp::allreduce, dtype, backend_op(op), bytes);
    if (plane_name != nullptr) *plane_name = plane.name();
    std::unique_ptr<Pending> operation = plane.start_allreduce(data, count, dtype, backend_op(op));
    if (!memory || !operation) return operation;
    return std::make_unique<HoldingMemory>(std::move(operation), std::move(memory));
}

}  // namespace ddp
