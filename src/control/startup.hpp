// ddp_init's collective steps on a freshly started backend: each rank's
// local outcome is exchanged so that every rank fails together (a rank
// whose environment, GPU or NCCL is unusable must not leave its peers
// waiting in their first collective), and a bounded wait for every rank
// before a failed start releases the backend.
#pragma once

#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace ddp {

/// The ranks whose local step failed (this one included when
/// `this_rank_failed`), after one exchange held to `timeout_s`.
std::vector<int> ranks_that_failed(Backend& backend, bool this_rank_failed, double timeout_s);

/// Whether every rank reaches this point within `seconds`.
bool all_reach(Backend& backend, double seconds);

/// "0, 2, 3"
std::string rank_list(const std::vector<int>& ranks);

}  // namespace ddp
