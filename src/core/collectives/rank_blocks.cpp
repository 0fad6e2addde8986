#include "core/collectives/rank_blocks.hpp"

#include <cstring>

#include "util/dtype.hpp"

namespace ddp {

namespace {

size_t block_bytes(const ddp_tensor& tensor, int ranks) { return byte_size(tensor) / static_cast<size_t>(ranks); }

}  // namespace

void pack_rank_blocks(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors, int ranks,
                      std::byte* bucket) {
    for (int rank = 0; rank < ranks; ++rank)
        for (int64_t index : plan.members_of(step)) {
            const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
            const size_t block = block_bytes(tensor, ranks);
            std::memcpy(bucket, static_cast<const std::byte*>(tensor.data) + rank * block, block);
            bucket += block;
        }
}

void unpack_rank_blocks(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors, int ranks,
                        const std::byte* bucket) {
    for (int rank = 0; rank < ranks; ++rank)
        for (int64_t index : plan.members_of(step)) {
            const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
            const size_t block = block_bytes(tensor, ranks);
            std::memcpy(static_cast<std::byte*>(tensor.data) + rank * block, bucket, block);
            bucket += block;
        }
}

}  // namespace ddp
