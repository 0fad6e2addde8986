// The collectives libddp runs, numbered for agreement and for the status
// peers exchange when a collective stalls.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

enum class CollectiveKind : uint64_t {
    allreduce = 1,
    broadcast = 2,
    reduce = 3,
    sync_optimizer_state = 4,
    check_replicas = 5,
    barrier = 6,
    reducer_create = 7,  ///< ddp_reducer_create
    reducer_step = 8,    ///< one step of a reducer, from its first mark to its wait
    timeline_start = 9,  ///< ddp_timeline_start (and DDP_TIMELINE in ddp_init)
    allgather = 10,
    reduce_scatter = 11,
    comm_split = 12,      ///< ddp_comm_split
    comm_split_node = 13, ///< ddp_comm_split_node
};

/// "allreduce", ...; "an unknown collective" for other values.
const char* kind_name(uint64_t kind);

/// "allreduce #5": a communicator's collective by kind and number.
std::string call_name(uint64_t kind, uint64_t sequence);

}  // namespace ddp
