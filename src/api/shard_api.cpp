// The exported dataset sharding calls: which items each rank reads.
#include <string>

#include "api/boundary.hpp"
#include "api/options.hpp"
#include "api/validate.hpp"
#include "core/shard.hpp"

using namespace ddp;

extern "C" {

DDP_API ddp_status ddp_shard_count(int64_t n_items, int32_t world, const ddp_shard_options* opts_in, int64_t* count) {
    return guarded([&] {
        require_not_null(count, "count");
        if (n_items < 0) fail(DDP_ERR_INVALID_ARGUMENT, "n_items is " + std::to_string(n_items) + "; it must be >= 0");
        if (world < 1) fail(DDP_ERR_INVALID_ARGUMENT, "world is " + std::to_string(world) + "; it must be >= 1");
        const ddp_shard_options opts = read_options(opts_in, default_shard_options(), "opts");
        if (opts.strategy != DDP_SHARD_STRIDED && opts.strategy != DDP_SHARD_CONTIGUOUS)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "opts->strategy " + std::to_string(opts.strategy) + " is not a ddp_shard_strategy");
        *count = shard_count(n_items, world, opts);
    });
}

DDP_API ddp_status ddp_shard_indices(int64_t n_items, int32_t rank, int32_t world, const ddp_shard_options* opts_in,
                                     int64_t* out, int64_t capacity, int64_t* count) {
    int64_t needed = 0;
    const ddp_status counted = ddp_shard_count(n_items, world, opts_in, &needed);
    if (counted != DDP_OK) return counted;
    return guarded([&] {
        if (rank < 0 || rank >= world)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "rank is " + std::to_string(rank) + "; it must be in [0, " + std::to_string(world) + ")");
        require_not_null(count, "count");
        const ddp_shard_options opts = read_options(opts_in, default_shard_options(), "opts");
        if (opts.shuffle && n_items > DDP_SHARD_SHUFFLE_MAX_ITEMS)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "n_items is " + std::to_string(n_items) + " but a shuffled shard accepts at most " +
                     std::to_string(DDP_SHARD_SHUFFLE_MAX_ITEMS) +
                     " (DDP_SHARD_SHUFFLE_MAX_ITEMS: the permutation needs memory for every item); shard "
                     "without shuffle, or shuffle blocks of items");
        if (capacity < needed) {
            *count = needed;
            fail(DDP_ERR_BUFFER_TOO_SMALL, "capacity is " + std::to_string(capacity) + " but rank " +
                                               std::to_string(rank) + " owns " + std::to_string(needed) +
                                               " items (ask ddp_shard_count first)");
        }
        if (needed > 0) require_not_null(out, "out");
        shard_indices(n_items, rank, world, opts, std::span(out, static_cast<size_t>(needed)));
        *count = needed;
    });
}

}  // extern "C"
