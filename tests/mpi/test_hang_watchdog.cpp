// The hang watchdog ends a process whose thread does not come back from a
// wait past the call's deadline plus the grace period. A thread stuck inside
// MPI (Open MPI's TCP transport after a peer died) does so only now and
// then; a log callback that blocks on the stall warning holds rank 0's
// thread inside its barrier the same way, every time. Rank 1 stays out of
// the barrier meanwhile. Run by run_hang_watchdog.sh with 2 ranks,
// DDP_TIMEOUT_S=1, DDP_STALL_WARN_S=0.3: with the watchdog on rank 0 must be
// aborted with its message; with it off its callback returns after
// `stuck_s`, and the barrier returns DDP_ERR_TIMEOUT. The first argument
// is the case (barrier or reducer), the second, if any,
// ddp_init_options.hang_watchdog_s.
//
// The reducer case: a reducer step is open from its first mark, while the
// caller computes; the watchdog must leave such a process alone (its thread
// is not inside libddp), however long past the step's deadline it computes.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#define DDP_EXPERIMENTAL_API  // the reducer
#include "ddp/ddp.h"

namespace {

constexpr int stuck_s = 6;

// Only the first warning (the stall report) holds the thread: later ones
// (the flight recorder's dump on the timeout) must not delay the result.
void stuck_on_the_first_warning(int32_t level, const char* line, void*) {
    static bool stuck = false;
    std::fprintf(stderr, "%s\n", line);
    if (level == DDP_LOG_WARN && !stuck) {
        stuck = true;
        std::this_thread::sleep_for(std::chrono::seconds(stuck_s));
    }
}

}  // namespace

int main(int argc, char** argv) {
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    if (argc > 2) opts.hang_watchdog_s = std::atof(argv[2]);
    ddp_comm* world = nullptr;
    if (ddp_init(&opts, &world) != DDP_OK) return 2;
    int32_t rank = 0;
    ddp_rank(world, &rank);
    ddp_status status = DDP_OK;
    if (argc > 1 && std::string(argv[1]) == "reducer") {
        const ddp_tensor layout[2] = {{nullptr, 4, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
                                      {nullptr, 4, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
        ddp_reducer* reducer = nullptr;
        if (ddp_reducer_create(world, layout, 2, DDP_OP_SUM, nullptr, &reducer) != DDP_OK) return 2;
        ddp_reducer_mark_ready(reducer, 0);
        std::this_thread::sleep_for(std::chrono::seconds(3));  // the "backward pass", past deadline + grace
        ddp_reducer_mark_ready(reducer, 1);
        status = ddp_reducer_wait(reducer);
        std::printf("rank %d: the reducer step returned %s\n", rank, ddp_status_name(status));
        ddp_reducer_free(reducer);
    } else if (rank == 0) {
        ddp_set_log_callback(&stuck_on_the_first_warning, nullptr);
        status = ddp_barrier(world, nullptr);
        std::printf("rank 0: the barrier returned %s: %s\n", ddp_status_name(status), ddp_last_error_message());
    } else {
        std::this_thread::sleep_for(std::chrono::seconds(stuck_s + 2));
    }
    ddp_finalize(world);
    std::fflush(stdout);
    return 0;
}
