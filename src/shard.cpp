#include "shard.hpp"

#include <numeric>
#include <utility>

namespace ddp {

namespace {

class SplitMix64 {
public:
    explicit SplitMix64(uint64_t state) : state_(state) {}
    uint64_t next() {
        state_ += 0x9E3779B97F4A7C15ull;
        uint64_t z = state_;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

private:
    uint64_t state_;
};

}  // namespace

int64_t shard_count(int64_t n_items, int32_t world, const ddp_shard_options& opts) {
    return opts.drop_last ? n_items / world : (n_items + world - 1) / world;
}

std::vector<int64_t> shard_order(int64_t n_items, const ddp_shard_options& opts) {
    std::vector<int64_t> order(static_cast<size_t>(n_items));
    std::iota(order.begin(), order.end(), int64_t{0});
    if (opts.shuffle) {
        SplitMix64 generator(opts.seed ^ (opts.epoch * 0xD1B54A32D192ED03ull));
        for (int64_t i = n_items - 1; i >= 1; --i) {
            auto j = static_cast<int64_t>(generator.next() % static_cast<uint64_t>(i + 1));
            std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
        }
    }
    return order;
}

void shard_indices(int64_t n_items, int32_t rank, int32_t world, const ddp_shard_options& opts,
                   int64_t* out) {
    const int64_t per_rank = shard_count(n_items, world, opts);
    if (per_rank == 0) return;
    const std::vector<int64_t> order = shard_order(n_items, opts);
    for (int64_t k = 0; k < per_rank; ++k) {
        const int64_t position = opts.strategy == DDP_SHARD_STRIDED ? rank + k * world
                                                                    : rank * per_rank + k;
        out[k] = order[static_cast<size_t>(position % n_items)];
    }
}

}  // namespace ddp
