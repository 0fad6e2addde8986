/* MPI_Allreduce alone, timed the way allreduce_bench.cpp's "sizes" section
 * times it (a barrier, then enough calls to move about 16 MiB; the slowest
 * rank's time over the calls; the median of the runs), so that an MPI that
 * libddp is not built against (Intel MPI, from its PyPI wheel) can be put
 * beside libddp's rows: bench/run-mpis builds it with that MPI's compiler.
 * Before each size it measures, as allreduce_bench does, how long a cache
 * line takes from one rank's core to the other's and back (the host moves
 * the vCPUs; rows are compared within one placement).
 *   mpi_allreduce_bench LABEL RUNS CSV   (appends rows as allreduce_bench's) */
#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

/* Nanoseconds of one round trip of a cache line between ranks 0 and 1,
 * through a shared-memory window (2 ranks on one node). */
static double round_trip_ns(_Atomic long* line, int rank) {
    enum { bounces = 20000 };
    _Atomic long* ping = line;
    _Atomic long* pong = line + 8; /* another cache line */
    if (rank == 0) atomic_store(ping, 0), atomic_store(pong, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (long k = 1; k <= bounces; ++k) {
        if (rank == 0) {
            atomic_store_explicit(ping, k, memory_order_release);
            while (atomic_load_explicit(pong, memory_order_acquire) != k) {}
        } else if (rank == 1) {
            while (atomic_load_explicit(ping, memory_order_acquire) != k) {}
            atomic_store_explicit(pong, k, memory_order_release);
        }
    }
    double ns = (MPI_Wtime() - start) * 1e9 / bounces;
    MPI_Bcast(&ns, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return ns;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: %s LABEL RUNS CSV\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "%s: 2 ranks on one node, please\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int runs = atoi(argv[2]);
    _Atomic long* line = NULL;
    MPI_Win window;
    MPI_Win_allocate_shared(rank == 0 ? 128 : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &line, &window);
    if (rank != 0) {
        MPI_Aint bytes;
        int unit;
        MPI_Win_shared_query(window, 0, &bytes, &unit, &line);
    }
    FILE* csv = rank == 0 ? fopen(argv[3], "a") : NULL;
    double* seconds = malloc(sizeof(double) * (size_t)(runs + 2));
    for (long bytes = 4096; bytes <= (256L << 20); bytes *= 4) {
        const int floats = (int)(bytes / (long)sizeof(float));
        float* data = calloc((size_t)floats, sizeof(float));
        long many = (16L << 20) / bytes;
        const int calls = many < 1 ? 1 : many > 1000 ? 1000 : (int)many;
        const double hop_ns = round_trip_ns(line, rank);
        for (int run = 0; run < runs + 2; ++run) { /* the first 2 warm up */
            MPI_Barrier(MPI_COMM_WORLD);
            const double start = MPI_Wtime();
            for (int i = 0; i < calls; ++i) MPI_Allreduce(MPI_IN_PLACE, data, floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double elapsed = (MPI_Wtime() - start) / calls;
            MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            seconds[run] = elapsed;
        }
        qsort(seconds + 2, (size_t)runs, sizeof(double), by_value);
        if (csv) {
            char list[32];
            if (bytes >= (1L << 20)) snprintf(list, sizeof list, "%ld MiB", bytes >> 20);
            else snprintf(list, sizeof list, "%ld KiB", bytes >> 10);
            fprintf(csv, "%s,%s,%d,\"MPI_Allreduce\",%.6f,%.6f,%.6f,,%.0f\n", list, argv[1], size,
                    seconds[2 + runs / 2] * 1e3, seconds[2] * 1e3, seconds[1 + runs] * 1e3, hop_ns);
        }
        free(data);
    }
    free(seconds);
    if (csv) fclose(csv);
    MPI_Win_free(&window);
    MPI_Finalize();
    return 0;
}
