// One buffer of 4 KiB to 256 MiB allreduced by N ranks that are threads of
// this process (ddp_init_local: the in-process plane), timed as
// allreduce_bench's "sizes" section times the shared-memory plane across
// processes (a barrier, calls moving about 16 MiB, the median of the runs),
// beside a memcpy of the same bytes; bench/run-local puts the two side by side.
// With "alltoall" it times ddp_alltoall_tensor_list of the buffer instead
// (each rank's blocks to every rank; under mpirun, of processes x threads).
//   local_bench RANKS RUNS CSV [alltoall]   (appends rows as allreduce_bench's)
#define DDP_EXPERIMENTAL_API
#include <ddp/ddp.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

void must(ddp_status status, const char* what) {
    if (status == DDP_OK) return;
    std::fprintf(stderr, "%s: %s: %s\n", what, ddp_status_name(status), ddp_last_error_message());
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    const bool alltoall = argc == 5 && std::string(argv[4]) == "alltoall";
    if (argc != 4 && !alltoall) {
        std::fprintf(stderr, "usage: %s RANKS RUNS CSV [alltoall]\n", argv[0]);
        return 2;
    }
    const int ranks = std::atoi(argv[1]), runs = std::atoi(argv[2]);
    FILE* csv = std::fopen(argv[3], "a");
    if (ranks < 1 || runs < 1 || csv == nullptr) {
        std::fprintf(stderr, "%s: RANKS and RUNS must be positive and CSV writable\n", argv[0]);
        return 2;
    }
    std::vector<ddp_comm*> comms(static_cast<size_t>(ranks));
    must(ddp_init_local(ranks, nullptr, nullptr, comms.data()), "ddp_init_local");
    int32_t group_size = 0;
    must(ddp_size(comms[0], &group_size), "ddp_size");
    const std::string label = "local/" + std::to_string(ranks) + " threads" + (alltoall ? " alltoall" : "");
    for (int64_t bytes = 4096; bytes <= (int64_t{256} << 20); bytes *= 4) {
        // An alltoall's buffer is one block per rank of the group.
        const auto floats = static_cast<size_t>(bytes) / sizeof(float) / static_cast<size_t>(group_size) *
                            static_cast<size_t>(group_size);
        const int calls = static_cast<int>(std::clamp<int64_t>((int64_t{16} << 20) / bytes, 1, 1000));
        std::vector<double> libddp, copying;
        std::barrier<> together(ranks);
        std::vector<std::jthread> threads;
        for (int rank = 0; rank < ranks; ++rank)
            threads.emplace_back([&, rank] {
                std::vector<float> data(floats, 1.0f), copy(floats), received(alltoall ? floats : 0);
                ddp_tensor tensor{data.data(), static_cast<int64_t>(floats), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
                ddp_tensor output{received.data(), static_cast<int64_t>(received.size()), DDP_DTYPE_F32,
                                  DDP_DEVICE_CPU, 0, 0};
                ddp_comm* comm = comms[static_cast<size_t>(rank)];
                for (int run = 0; run < runs + 2; ++run) {  // the first 2 warm up
                    must(ddp_barrier(comm, nullptr), "ddp_barrier");
                    auto start = std::chrono::steady_clock::now();
                    for (int i = 0; i < calls; ++i)
                        must(alltoall ? ddp_alltoall_tensor_list(comm, &tensor, &output, 1, nullptr)
                                      : ddp_allreduce_tensor_list(comm, &tensor, 1, DDP_OP_SUM, nullptr),
                             alltoall ? "alltoall" : "allreduce");
                    const double reduced = seconds_since(start) / calls;
                    together.arrive_and_wait();  // every rank copies at once, as every rank reduced
                    start = std::chrono::steady_clock::now();
                    for (int i = 0; i < calls; ++i) std::memcpy(copy.data(), data.data(), floats * sizeof(float));
                    const double copied = seconds_since(start) / calls;
                    if (rank == 0 && run >= 2) libddp.push_back(reduced), copying.push_back(copied);
                }
            });
        threads.clear();  // joins
        const std::string list = bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB"
                                                    : std::to_string(bytes >> 10) + " KiB";
        const double reduced = median(libddp), copied = median(copying);
        std::fprintf(csv, "%s,%s,%d,\"libddp\",%.6f,%.6f,%.6f,1.0000,\n", list.c_str(), label.c_str(), ranks,
                     reduced * 1e3, *std::min_element(libddp.begin(), libddp.end()) * 1e3,
                     *std::max_element(libddp.begin(), libddp.end()) * 1e3);
        std::fprintf(csv, "%s,%s,%d,\"memcpy (floor)\",%.6f,%.6f,%.6f,%.4f,\n", list.c_str(), label.c_str(), ranks,
                     copied * 1e3, *std::min_element(copying.begin(), copying.end()) * 1e3,
                     *std::max_element(copying.begin(), copying.end()) * 1e3, copied / reduced);
    }
    std::vector<std::jthread> finalizers;
    for (ddp_comm* comm : comms) finalizers.emplace_back([comm] { must(ddp_finalize(comm), "ddp_finalize"); });
    finalizers.clear();
    std::fclose(csv);
    return 0;
}
