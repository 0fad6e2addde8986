// The one step loop: runs a fusion plan's steps for every collective that
// moves data in steps, pipelined (step k+1 is packed and started before step
// k is waited for, so packing overlaps the transfer). Each step goes to the
// first host plane whose table covers it (planes/plane_list.hpp); picking
// the plane, the buckets, waiting under the call's deadline, timing and the
// timeline's events are here once. What differs between collectives, where
// a step's bytes lie and how they are packed, started and unpacked, each
// collective says in its own PlanSteps (Gloo writes each algorithm once over
// a transport; here the loop is written once over these).
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "core/collectives.hpp"
#include "core/fusion_plan.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

/// Where a step's bytes are while a plane moves them.
enum class Place {
    caller,  ///< in the caller's tensors (a lone tensor, or members that lie back to back)
    pieces,  ///< in the members where they lie, gathered by the plane (HostPlane::gathers_pieces)
    bucket,  ///< packed into a bucket of libddp's own
};

/// One collective's part of the step loop.
class PlanSteps {
public:
    virtual ~PlanSteps() = default;
    /// The operation the steps are and their reduction, as the planes are asked.
    virtual DataOp op() const = 0;
    virtual ddp_op reduction() const { return DDP_OP_SUM; }
    /// The bytes of the bucket a fused step is packed into.
    virtual size_t bucket_bytes(const PlanStep& step) const = 0;
    /// Where `step` runs on `plane`: by default a fused step in a bucket,
    /// a lone tensor where it lies.
    virtual Place place(const PlanStep& step, const HostPlane&) const {
        return step.fused ? Place::bucket : Place::caller;
    }
    /// The timeline's name for what runs before the transfer (packing), or
    /// nullptr when nothing does; then pack() is not called.
    virtual const char* before(Place place) const { return place == Place::bucket ? "pack" : nullptr; }
    virtual void pack(const PlanStep&, std::byte* /*bucket*/) const {}
    /// Starts the step on `plane` (`bucket` only for Place::bucket).
    virtual std::unique_ptr<Pending> start(HostPlane& plane, const PlanStep& step, Place place,
                                           std::byte* bucket) const = 0;
    /// The timeline's name for what runs once the transfer ended
    /// (unpacking, AVG's division), or nullptr; then unpack() is not called.
    virtual const char* after(Place place) const = 0;
    virtual void unpack(const PlanStep&, Place, const std::byte* /*bucket*/) const {}
};

/// Runs every step of `plan` as `steps` says.
void run_plan(Communicator& comm, CallContext& context, const FusionPlan& plan, const CollectiveCall& call,
              const PlanSteps& steps);

}  // namespace ddp
