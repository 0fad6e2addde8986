#include "core/shard.hpp"

#include <numeric>
#include <utility>
#include <vector>

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

// Step 2 of ddp.h's order: the shuffled permutation. 32-bit entries halve
// its memory; DDP_SHARD_SHUFFLE_MAX_ITEMS keeps every index in range.
std::vector<uint32_t> shuffled_order(int64_t n_items, const ddp_shard_options& opts) {
    std::vector<uint32_t> order(static_cast<size_t>(n_items));
    std::iota(order.begin(), order.end(), uint32_t{0});
    SplitMix64 generator(opts.seed ^ (opts.epoch * 0xD1B54A32D192ED03ull));
    for (uint64_t i = static_cast<uint64_t>(n_items) - 1; i >= 1; --i) {
        const uint64_t j = generator.next() % (i + 1);
        std::swap(order[i], order[j]);
    }
    return order;
}

}  // namespace

int64_t shard_count(int64_t n_items, int32_t world, const ddp_shard_options& opts) {
    const int64_t whole = n_items / world;
    return opts.drop_last || n_items % world == 0 ? whole : whole + 1;
}

void shard_indices(int64_t n_items, int32_t rank, int32_t world, const ddp_shard_options& opts,
                   std::span<int64_t> out) {
    if (out.empty()) return;
    // Positions are below per_rank * world < n_items + world < 2^64: unsigned arithmetic never wraps.
    const auto n = static_cast<uint64_t>(n_items);
    const auto per_rank = static_cast<uint64_t>(out.size());
    const auto stride = static_cast<uint64_t>(world);
    auto position = [&](uint64_t k) {
        const uint64_t p = opts.strategy == DDP_SHARD_STRIDED ? static_cast<uint64_t>(rank) + k * stride
                                                              : static_cast<uint64_t>(rank) * per_rank + k;
        return p % n;  // wrap-around padding: order[k mod n_items]
    };
    if (!opts.shuffle) {
        for (uint64_t k = 0; k < per_rank; ++k) out[k] = static_cast<int64_t>(position(k));
        return;
    }
    const std::vector<uint32_t> order = shuffled_order(n_items, opts);
    for (uint64_t k = 0; k < per_rank; ++k) out[k] = order[position(k)];
}

}  // namespace ddp
