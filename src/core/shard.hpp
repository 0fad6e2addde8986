// Which data set items each rank owns: the permutation and split that
// ddp.h documents step by step, so that every language gets the same shard.
#pragma once

#include <cstdint>
#include <span>

#include "ddp/ddp.h"

namespace ddp {

/// Items per rank, exact for every n_items >= 0; arguments validated.
int64_t shard_count(int64_t n_items, int32_t world, const ddp_shard_options& opts);

/// Writes rank's shard_count() indices to `out`. Memory beyond `out` is
/// needed only when shuffling (the permutation of every item), and
/// shuffled n_items must not exceed DDP_SHARD_SHUFFLE_MAX_ITEMS.
void shard_indices(int64_t n_items, int32_t rank, int32_t world, const ddp_shard_options& opts,
                   std::span<int64_t> out);

}  // namespace ddp
