// Which data set items each rank owns: the permutation and split that
// ddp.h documents step by step, so that every language gets the same shard.
#pragma once

#include <cstdint>
#include <vector>

#include "ddp/ddp.h"

namespace ddp {

/// Items per rank; arguments must already be validated.
int64_t shard_count(int64_t n_items, int32_t world, const ddp_shard_options& opts);

/// The item order of step 2 in ddp.h (shuffled or not).
std::vector<int64_t> shard_order(int64_t n_items, const ddp_shard_options& opts);

/// Writes rank's shard_count() indices to out.
void shard_indices(int64_t n_items, int32_t rank, int32_t world, const ddp_shard_options& opts,
                   int64_t* out);

}  // namespace ddp
