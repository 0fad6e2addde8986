// Before a collective moves data, the ranks agree that they are making the
// same call: same kind, op, root, fusion size and tensor list. Each rank
// hashes its call's description; one 16-byte MAX-allreduce of (hash, ~hash)
// tells every rank whether all hashes were equal. Only when they were not do
// the ranks exchange the descriptions, to name the ranks and the first
// differing tensor in the same message on every rank.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ddp/ddp.h"
#include "transport.hpp"

namespace ddp {

enum class CollectiveKind : uint64_t {
    allreduce = 1,
    broadcast = 2,
    reduce = 3,
    sync_optimizer_state = 4,
    check_replicas = 5,
    barrier = 6,
};

/// What a rank passed to a collective; every field takes part in agreement.
struct CallDescription {
    CollectiveKind kind;
    ddp_op op = DDP_OP_SUM;
    int32_t root = 0;
    int64_t fusion_bytes = 0;
    int64_t n_scalars = 0;
    std::span<const ddp_tensor> tensors;
};

/// Agrees on `call` and returns the hash of its description (a key for
/// caching the fusion plan). Throws DDP_ERR_MISMATCH when ranks differ.
uint64_t agree(Transport& transport, const CallDescription& call, Clock::time_point deadline);

/// Takes part in agreement for a call whose arguments failed validation on
/// this rank, so that the peers return DDP_ERR_MISMATCH instead of waiting.
void agree_on_invalid_call(Transport& transport, CollectiveKind kind, Clock::time_point deadline);

}  // namespace ddp
