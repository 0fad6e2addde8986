// A rank killed (SIGKILL) while 64 MB allreduces are in flight: the
// survivor's collective ends in DDP_ERR_TIMEOUT within the timeout instead
// of hanging in MPI for ever (or in DDP_ERR_BACKEND with MPI's error, when
// MPI itself notices the dead peer at once: a TCP connection it was still
// opening to it fails), and its ddp_finalize returns in bounded time.
// Run by run_killed_rank.sh under `mpirun --enable-recovery -np 2` with
// DDP_TIMEOUT_S=2; the survivor prints one line the script checks.
//
// An optional argument (single, serialized, multiple) initializes MPI at
// that thread level before ddp_init, which keeps it: docs/multinode.md
// measures how often Open MPI's TCP transport deadlocks at each.
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "ddp/ddp.h"

int main(int argc, char** argv) {
    if (argc > 1) {
        const char* names[] = {"single", "funneled", "serialized", "multiple"};
        const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
        int wanted = -1, provided = 0;
        for (int i = 0; i < 4; ++i)
            if (std::strcmp(argv[1], names[i]) == 0) wanted = levels[i];
        if (wanted < 0) return 2;
        MPI_Init_thread(&argc, &argv, wanted, &provided);
    }
    ddp_comm* world = nullptr;
    if (ddp_init(nullptr, &world) != DDP_OK) return 2;
    int32_t rank = 0;
    ddp_rank(world, &rank);
    // 64 MB; KILLED_RANK_FLOATS chooses another size (4 MB: the shared-memory plane's steps).
    const char* floats = std::getenv("KILLED_RANK_FLOATS");
    std::vector<float> data(floats != nullptr ? std::strtoul(floats, nullptr, 10) : 16u << 20, 1.0f);
    ddp_tensor tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    if (rank == 1) {
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(700));
            std::raise(SIGKILL);
        }).detach();
    }
    ddp_status status = DDP_OK;
    auto last_start = std::chrono::steady_clock::now();
    int calls = 0;
    while (status == DDP_OK) {
        last_start = std::chrono::steady_clock::now();
        status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr);
        ++calls;
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_start).count();
    const auto finalize_start = std::chrono::steady_clock::now();
    ddp_finalize(world);
    const double finalize_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - finalize_start).count();
    std::printf("survivor rank %d: call %d returned %s after %.2f s, finalize took %.2f s: %s\n", rank, calls,
                ddp_status_name(status), waited, finalize_s, ddp_last_error_message());
    const bool right =
        (status == DDP_ERR_TIMEOUT || status == DDP_ERR_BACKEND) && waited < 5 && finalize_s < 10;
    std::printf("%s\n", right ? "SURVIVOR OK" : "SURVIVOR WRONG");
    std::fflush(stdout);
    return right ? 0 : 1;
}
