// The steps of the in-place collectives (allreduce, reduce, broadcast) for
// the step loop (core/plan_runner.hpp): the result replaces the input, so a
// step runs where its bytes already lie whenever it can.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "core/plan_runner.hpp"

namespace ddp {

/// The steps of the in-place collectives (allreduce, reduce, broadcast): a
/// step runs on the tensor itself for single tensors and for members
/// already contiguous in memory, on the members where they lie when the
/// plane gathers them and `start_pieces` is given, else on a bucket (packed
/// before when `pack_before`, unpacked after when `unpack_after`, divided
/// by `divisor` for AVG).
class InPlaceSteps final : public PlanSteps {
public:
    using Start = std::function<std::unique_ptr<Pending>(HostPlane& plane, void* data, int64_t count,
                                                         ddp_dtype dtype)>;
    using StartPieces = std::function<std::unique_ptr<Pending>(HostPlane& plane, std::span<const Piece> pieces,
                                                               int64_t count, ddp_dtype dtype)>;
    struct Form {
        DataOp op;
        ddp_op reduction = DDP_OP_SUM;
        bool pack_before = true;
        bool unpack_after = true;
        double divisor = 1.0;
        Start start;
        StartPieces start_pieces = nullptr;
    };
    InPlaceSteps(const FusionPlan& plan, std::span<const ddp_tensor> tensors, Form form)
        : plan_(plan), tensors_(tensors), form_(std::move(form)) {}

    DataOp op() const override { return form_.op; }
    ddp_op reduction() const override { return form_.reduction; }
    size_t bucket_bytes(const PlanStep& step) const override;
    Place place(const PlanStep& step, const HostPlane& plane) const override;
    const char* before(Place place) const override;
    void pack(const PlanStep& step, std::byte* bucket) const override;
    std::unique_ptr<Pending> start(HostPlane& plane, const PlanStep& step, Place place,
                                   std::byte* bucket) const override;
    const char* after(Place place) const override;
    void unpack(const PlanStep& step, Place place, const std::byte* bucket) const override;

private:
    const FusionPlan& plan_;
    std::span<const ddp_tensor> tensors_;
    Form form_;
};

/// Copies `tensor` into the bucket at `bucket`; returns the end of its bytes.
std::byte* pack_one(const ddp_tensor& tensor, std::byte* bucket);

/// Copies the tensor's bytes back from the bucket, dividing by `divisor`
/// (AVG); returns the end of its bytes in the bucket.
const std::byte* unpack_one(const ddp_tensor& tensor, const std::byte* bucket, double divisor);

}  // namespace ddp
