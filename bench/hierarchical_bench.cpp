// Hierarchical against flat allreduce on simulated nodes (bench/run-hierarchical
// starts 2 nodes x 2 ranks, once per way libddp is set to go): libddp's
// allreduce of one f32 buffer (the hierarchical plane from 1 MiB up, unless
// DDP_HIERARCHICAL=0) against MPI_Allreduce of the same bytes on
// MPI_COMM_WORLD, and against a memcpy of them (the floor), interleaved
// round by round; medians of the slowest rank's time. Rows are appended to
// CSV under LABEL (the header first where the file is new).
//   hierarchical_bench RUNS CSV LABEL
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "ddp/ddp.h"

namespace {

// Seconds one call takes on the slowest rank, after a barrier.
double timed(const std::function<void()>& call) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    call();
    double elapsed = MPI_Wtime() - start, slowest = 0;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const int runs = argc > 1 ? std::atoi(argv[1]) : 10;
    const char* csv_path = argc > 2 ? argv[2] : nullptr;
    const char* label = argc > 3 ? argv[3] : "libddp";
    ddp_comm* world = nullptr;
    if (ddp_init(nullptr, &world) != DDP_OK) {
        std::fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        return 1;
    }
    int rank = 0, size = 1, local_size = 1;
    ddp_rank(world, &rank);
    ddp_size(world, &size);
    ddp_local_size(world, &local_size);
    FILE* csv = rank == 0 && csv_path != nullptr ? std::fopen(csv_path, "a") : nullptr;
    if (csv != nullptr && std::fseek(csv, 0, SEEK_END) == 0 && std::ftell(csv) == 0)
        std::fprintf(csv, "label,bytes,libddp_ms,mpi_allreduce_ms,memcpy_ms,mpi_over_libddp\n");
    if (rank == 0)
        std::printf("%s: %d ranks, %d per node; medians of %d runs (slowest rank)\n%12s %12s %14s %10s %14s\n",
                    label, size, local_size, runs, "bytes", "libddp ms", "MPI_Allreduce", "memcpy ms",
                    "MPI / libddp");
    for (int64_t bytes = 4096; bytes <= (int64_t{256} << 20); bytes *= 4) {
        const int64_t count = bytes / 4;
        std::vector<float> data(static_cast<size_t>(count), 1.0f), copy(static_cast<size_t>(count));
        ddp_tensor tensor{data.data(), count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        std::vector<double> ddp_s, mpi_s, copy_s;
        const int rounds = bytes >= (int64_t{64} << 20) ? std::max(3, runs / 3) : runs;
        for (int round = 0; round < rounds + 1; ++round) {  // the first round warms up
            const double d = timed([&] { ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr); });
            const double m = timed(
                [&] { MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
            const double c = timed([&] { std::memcpy(copy.data(), data.data(), static_cast<size_t>(bytes)); });
            std::fill(data.begin(), data.end(), 1.0f);  // keep the values small
            if (round == 0) continue;
            ddp_s.push_back(d);
            mpi_s.push_back(m);
            copy_s.push_back(c);
        }
        if (rank != 0) continue;
        const double d = median(ddp_s) * 1e3, m = median(mpi_s) * 1e3, c = median(copy_s) * 1e3;
        std::printf("%12lld %12.3f %14.3f %10.3f %14.2f\n", static_cast<long long>(bytes), d, m, c, m / d);
        if (csv != nullptr)
            std::fprintf(csv, "%s,%lld,%.4f,%.4f,%.4f,%.3f\n", label, static_cast<long long>(bytes), d, m, c, m / d);
    }
    if (csv != nullptr) std::fclose(csv);
    return ddp_finalize(world) == DDP_OK ? 0 : 1;
}
