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
    bool sleep(Clock::time_point until) override { return operation_->sleep(until); }
    uint64_t progress() const override { return operation_->progress(); }

private:
    std::shared_ptr<void> memory_;
    std::unique_ptr<Pending> operation_;  // declared last: goes before its memory
};

}  // namespace

int64_t step_bytes(const PlanStep& step) { return step.elements * static_cast<int64_t>(element_size(step.dtype)); }

double avg_divisor(Communicator& comm, ddp_op op) {
    return op == DDP_OP_AVG ? static_cast<double>(comm.size()) : 1.0;
}

HostPlane& allreduce_plane(Communicator& comm, int64_t count, ddp_dtype dtype, ddp_op op) {
    const int64_t bytes = count * static_cast<int64_t>(element_size(dtype));
    return comm.planes().host_for(DataOp::allreduce, dtype, plane_op(op), bytes);
}

std::unique_ptr<Pending> start_allreduce_step(Communicator& comm, void* data, int64_t count, ddp_dtype dtype,
                                              ddp_op op, std::shared_ptr<void> memory, const char** plane_name) {
    HostPlane& plane = allreduce_plane(comm, count, dtype, op);
    if (plane_name != nullptr) *plane_name = plane.name();
    std::unique_ptr<Pending> operation = plane.start_allreduce(data, count, dtype, plane_op(op));
    if (!memory || !operation) return operation;
    return std::make_unique<HoldingMemory>(std::move(operation), std::move(memory));
}

}  // namespace ddp
