#include "planes/nccl/local_ranks.hpp"

#include <cstdlib>

namespace ddp {

// Since NCCL 2.22 a rank connects to its peers in its first collective, and
// allocates and maps device memory there. A rank that launched first leaves
// a kernel spinning until its peers join; a rank of the same process that
// comes later then waits in that allocation for the kernel, and neither goes
// on (NVIDIA/nccl#787; seen on an H200: 2 processes x 2 threads, first
// allreduce). Connected at set-up, which every local rank finishes before
// ddp_init_local returns, no collective allocates. NCCL reads the variable
// at its first set-up in the process, and keeps it.
std::string connect_nccl_ranks_at_set_up() {
    if (const char* set = std::getenv("NCCL_RUNTIME_CONNECT"))
        return std::string("NCCL_RUNTIME_CONNECT=") + set + " is the user's: with it not 0, a rank of this process "
               "that launches before another has connected can hang the group (NVIDIA/nccl#787)";
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    return "NCCL_RUNTIME_CONNECT=0: NCCL connects this process's ranks as it sets them up, so that no collective "
           "allocates device memory while another rank's kernel runs";
}

}  // namespace ddp
