// Runs a fusion plan's steps for the in-place collectives (allreduce,
// reduce, broadcast), pipelined: step k+1 is packed and started before step
// k is waited for, so packing overlaps the transfer. Each step goes to the
// first host plane that runs it (planes/plane_list.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "core/collectives.hpp"
#include "core/fusion_plan.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

/// What a plan step does on one buffer: start the operation on `plane`.
using StartStep =
    std::function<std::unique_ptr<Pending>(HostPlane& plane, void* data, int64_t count, ddp_dtype dtype)>;

/// The same on the members of a fused step where they lie (HostPlane::start_allreduce_pieces).
using StartPieces = std::function<std::unique_ptr<Pending>(HostPlane& plane, std::span<const Piece> pieces,
                                                           int64_t count, ddp_dtype dtype)>;

/// How a plan runs for one collective: the operation its steps are (which
/// picks the plane), whether this rank's buckets are packed before (its
/// inputs matter) and unpacked after (it receives the results), AVG's
/// divisor (1: none), and, for a collective that has one, how a step
/// starts on members left where they lie, on planes that gather them.
struct PlanRun {
    DataOp op;
    ddp_op reduction = DDP_OP_SUM;
    bool pack_before = true;
    bool unpack_after = true;
    double divisor = 1.0;
    StartPieces start_pieces = nullptr;
};

void run_plan(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call,
              const PlanRun& run, const StartStep& start);

/// Copies `tensor` into the bucket at `bucket`; returns the end of its bytes.
std::byte* pack_one(const ddp_tensor& tensor, std::byte* bucket);

/// Copies the tensor's bytes back from the bucket, dividing by `divisor`
/// (AVG); returns the end of its bytes in the bucket.
const std::byte* unpack_one(const ddp_tensor& tensor, const std::byte* bucket, double divisor);

}  // namespace ddp
