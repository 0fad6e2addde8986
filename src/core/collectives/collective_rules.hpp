// What each collective does once every rank has agreed on the call: one
// file per collective in this folder (Gloo's layout), each defining its
// rules (`extern const CollectiveRules name_rules{...}`, listed by kind in
// collective_rules.cpp); core/collectives.cpp runs any of them the same way (numbering,
// agreement, deadline, staging). A collective that has no device form is
// staged through host memory; one a plane lacks is refused by that plane.
#pragma once

#include <cstdint>
#include <span>

#include "core/collectives.hpp"
#include "core/collectives/takes.hpp"
#include "core/fusion_plan.hpp"
#include "planes/device_plane.hpp"

namespace ddp {

/// Which way a rank's bytes cross between device and host when a call on
/// device buffers is staged through host memory.
struct Crossing {
    bool to_host;    ///< the rank's inputs matter
    bool to_device;  ///< the rank receives results
};

struct CollectiveRules {
    /// What a call takes besides its list, checked at the C boundary.
    Takes takes;
    /// The data phase on host buffers (device buffers staged end here too),
    /// given the fusion plan of the agreed list.
    void (*host)(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan& plan);
    /// Whether the host phase moves data in a fusion plan (else `plan` is empty).
    bool planned = true;
    /// The device plane operation the call is (asked whether the plane runs
    /// it), and its enqueueing on `stream`; nullptr: always staged.
    DataOp device_op = DataOp::allreduce;
    void (*device)(Communicator& comm, CallContext& context, const CollectiveCall& call, DevicePlane& plane,
                   void* stream) = nullptr;
    /// When staged: which way rank `rank`'s bytes cross.
    Crossing (*crossing)(const CollectiveCall& call, int rank) = nullptr;
    /// A small call whose data rides inside agreement's own messages: its
    /// bytes (0: it does not), and the call's whole run in that case.
    int64_t (*carried_bytes)(Communicator& comm, const CollectiveCall& call) = nullptr;
    void (*in_agreement)(Communicator& comm, CallContext& context, const CollectiveCall& call,
                         std::span<const uint64_t> words, int64_t bytes) = nullptr;
};

/// The rules of a collective run through run_collective (not the reducer,
/// the splits or timeline_start, which run their own calls).
const CollectiveRules& rules_for(CollectiveKind kind);

/// Both ways for every rank: allreduce, allgather, reduce_scatter, alltoall.
Crossing both_ways(const CollectiveCall& call, int rank);

}  // namespace ddp
