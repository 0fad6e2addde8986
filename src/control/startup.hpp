// ddp_init's collective steps on a freshly started transport: each rank's
// local outcome is exchanged so that every rank fails together (a rank
// whose environment, GPU or NCCL is unusable must not leave its peers
// waiting in their first collective), and a bounded wait for every rank
// before a failed start releases the transport.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "control/channel.hpp"
#include "util/error.hpp"

namespace ddp {

/// Exchanges whether each rank's local step failed (`mine`: this rank's
/// error) and, when any did, throws on every rank: this rank's own error,
/// prefixed with its rank, or `others_status` with "rank(s) 1, 3 " and
/// `others_failed`.
void fail_together(ControlChannel& channel, const std::optional<Error>& mine, double timeout_s, ddp_status others_status,
                   const std::string& others_failed);

/// Every rank's `words`, by rank, after one exchange held to `timeout_s`.
std::vector<std::vector<uint64_t>> exchange_words(ControlChannel& channel, std::span<const uint64_t> words,
                                                  double timeout_s);

/// Whether every rank reaches this point within `seconds`.
bool all_reach(ControlChannel& channel, double seconds);

}  // namespace ddp
