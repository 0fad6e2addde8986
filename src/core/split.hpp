// Sub-communicators (ddp_comm_split, ddp_comm_split_node): a collective on
// the parent (numbered, agreed on and held to the parent's deadline like
// any other), whose result is a Communicator with planes, a control plane,
// worker and name of its own, so that its deadlines, stall reports and
// breakage are its own.
#pragma once

#include <cstdint>
#include <memory>

#include "util/collective_kind.hpp"
#include "core/communicator.hpp"

namespace ddp {

/// What a rank asks of a split, validated.
struct SplitRequest {
    CollectiveKind kind = CollectiveKind::comm_split;  ///< or comm_split_node (color and key unused)
    int32_t color = 0;                                 ///< >= 0, or negative: join none
    int32_t key = 0;
    double timeout_s = 0;  ///< the sub-communicator's; 0: the parent's
};

/// Runs the split on `parent` (call it inside parent.run()). Returns the
/// new sub-communicator, or nullptr for a rank that joins none. Throws
/// DDP_ERR_MISMATCH, DDP_ERR_TIMEOUT, DDP_ERR_BACKEND, DDP_ERR_UNSUPPORTED.
std::unique_ptr<Communicator> split_communicator(Communicator& parent, const SplitRequest& request);

}  // namespace ddp
