// What a call of each collective takes besides its tensor list, as facts in
// the collective's rules (CollectiveRules::takes). The C boundary checks
// every call against them the same way (NCCL's ArgsCheck on its one
// ncclInfo), so a new collective says what it takes instead of checking
// its arguments itself.
#pragma once

#include <cstdint>

namespace ddp {

/// How a collective sizes its outputs from its inputs.
enum class Sharding {
    none,     ///< no outputs: the list is read, or written in place
    gather,   ///< allgather: each output holds `size` inputs
    scatter,  ///< reduce_scatter: each output holds 1/size of its input
    exchange, ///< alltoall: each output holds as many elements as its input, a multiple of `size`
};

/// The most elements one rank's shard (reduce_scatter) or block (alltoall)
/// may hold: one MPI count, which the mpi plane moves in one operation.
constexpr int64_t max_shard_elements = (int64_t{1} << 30) - 1;

struct Takes {
    const char* list_name = "tensors";  ///< what messages call the list
    bool writes_list = true;            ///< in place, so its tensors must not overlap
    Sharding outputs = Sharding::none;
    bool op = false;                    ///< a reduction (AVG only on floating tensors)
    bool root = false;                  ///< a root rank
    bool scalars = false;               ///< host doubles beside the list (sync_optimizer_state)
};

}  // namespace ddp
