// Two groups across processes x threads, one after the other, where libddp
// starts MPI itself (no MPI_Init here): the first group's finalize leaves
// MPI running for the second, and MPI ends when the process exits (mpirun
// fails the job if a process ends without finalizing MPI). Exits 0 when
// both groups summed right.
#define DDP_EXPERIMENTAL_API  // ddp_init_local
#include <cstdio>
#include <thread>
#include <vector>

#include "ddp/ddp.h"

namespace {

bool one_group(int round) {
    ddp_comm* comms[2] = {nullptr, nullptr};
    if (ddp_init_local(2, nullptr, nullptr, comms) != DDP_OK) {
        std::fprintf(stderr, "group %d: ddp_init_local: %s\n", round, ddp_last_error_message());
        return false;
    }
    bool right[2] = {false, false};
    {
        std::vector<std::jthread> threads;
        for (int i = 0; i < 2; ++i)
            threads.emplace_back([&, i] {
                int32_t rank = -1, size = -1;
                ddp_rank(comms[i], &rank);
                ddp_size(comms[i], &size);
                std::vector<float> data(1000, static_cast<float>(rank + round));
                ddp_tensor t{data.data(), 1000, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
                const bool reduced = ddp_allreduce_tensor_list(comms[i], &t, 1, DDP_OP_SUM, nullptr) == DDP_OK;
                const float expected = static_cast<float>(size * (size - 1) / 2 + size * round);
                right[i] = reduced && data[0] == expected && data[999] == expected;
                if (!right[i]) std::fprintf(stderr, "group %d, rank %d: %s\n", round, rank, ddp_last_error_message());
            });
    }
    // Ended from this thread, the one that started MPI, rank after rank.
    for (ddp_comm* comm : comms)
        if (ddp_finalize(comm) != DDP_OK) {
            std::fprintf(stderr, "group %d: ddp_finalize: %s\n", round, ddp_last_error_message());
            return false;
        }
    return right[0] && right[1];
}

}  // namespace

int main() { return one_group(0) && one_group(1) ? 0 : 1; }
