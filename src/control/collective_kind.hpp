// The collectives libddp runs, numbered for agreement and for the status
// peers exchange when a collective stalls.
#pragma once

#include <cstdint>

namespace ddp {

enum class CollectiveKind : uint64_t {
    allreduce = 1,
    broadcast = 2,
    reduce = 3,
    sync_optimizer_state = 4,
    check_replicas = 5,
    barrier = 6,
};

/// "allreduce", ...; "an unknown collective" for other values.
const char* kind_name(uint64_t kind);

}  // namespace ddp
