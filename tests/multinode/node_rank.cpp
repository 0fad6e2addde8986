// One rank of a simulated-node case (run_case.sh): writes where it runs
// (host name, rank, local rank) and then, `calls` times (0: until a call
// fails), allreduces 256 KiB of floats (DDP_MN_FLOATS floats where set:
// 1 Mi of them reach the hierarchical plane) and sleeps 20 ms, checking every
// result exactly. With DDP_MN_COMPUTE_S, rank 1 computes (spins on its core)
// that many seconds before its third call, while its peers wait in it. (A count, not a time: every rank must stop after the same
// call.) Its outcome goes to a file of its own in DDP_MN_OUT (the
// namespaces share the file system; a rank cut off from the launcher could
// not send it there), with the wall-clock time so that the harness can
// measure from the moment it injected a fault.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ddp/ddp.h"

namespace {

double wall_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void write_file(const std::string& path, const std::string& text) {
    if (FILE* file = std::fopen(path.c_str(), "w")) {
        std::fputs(text.c_str(), file);
        std::fclose(file);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int wanted_calls = argc > 1 ? std::atoi(argv[1]) : 100;
    const char* out_dir = std::getenv("DDP_MN_OUT");
    if (out_dir == nullptr) return 2;
    ddp_comm* world = nullptr;
    if (ddp_init(nullptr, &world) != DDP_OK) {
        std::fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        return 2;
    }
    int32_t rank = 0, size = 0, local_rank = 0, local_size = 0;
    ddp_rank(world, &rank);
    ddp_size(world, &size);
    ddp_local_rank(world, &local_rank);
    ddp_local_size(world, &local_size);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::string prefix = std::string(out_dir) + "/rank" + std::to_string(rank);
    write_file(prefix + ".place", std::string(host) + " " + std::to_string(rank) + " " + std::to_string(local_rank) +
                                      " " + std::to_string(local_size) + " " + std::to_string(getpid()) + "\n");

    const char* floats = std::getenv("DDP_MN_FLOATS");
    std::vector<float> data(floats != nullptr ? std::strtoull(floats, nullptr, 10) : 64 << 10);
    const float expected = static_cast<float>(size) * static_cast<float>(size + 1) / 2;
    ddp_status status = DDP_OK;
    int calls = 0, wrong = 0;
    const char* compute = std::getenv("DDP_MN_COMPUTE_S");
    while (wanted_calls == 0 || calls < wanted_calls) {
        if (compute != nullptr && rank == 1 && calls == 2) {
            const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(compute));
            volatile double sink = 0;
            while (std::chrono::steady_clock::now() < end) sink = sink + 1;
        }
        data.assign(data.size(), static_cast<float>(rank + 1));
        ddp_tensor tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr);
        if (status != DDP_OK) break;
        ++calls;
        for (float value : data) wrong += value != expected;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const double returned = wall_now();
    const std::string message = status == DDP_OK ? "" : ddp_last_error_message();
    char line[128];
    std::snprintf(line, sizeof line, "%s %.3f %d %d ", ddp_status_name(status), returned, calls, wrong);
    write_file(prefix + ".result", line + message + "\n");
    ddp_finalize(world);
    return status == DDP_OK && wrong == 0 ? 0 : 1;
}
