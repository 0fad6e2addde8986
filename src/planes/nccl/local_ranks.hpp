// Several ranks of one NCCL communicator in one process (ddp_init_local with
// devices), each launching from a thread of its own: what NCCL needs then.
#pragma once

#include <string>

namespace ddp {

/// Makes NCCL connect the ranks while it sets them up rather than in their
/// first collective (NCCL_RUNTIME_CONNECT=0), unless the user set
/// NCCL_RUNTIME_CONNECT; called before the group's NCCL set-up. Returns what
/// it did, for the debug log.
std::string connect_nccl_ranks_at_set_up();

}  // namespace ddp
