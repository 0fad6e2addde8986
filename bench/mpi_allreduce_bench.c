/* MPI_Allreduce alone, timed the way allreduce_bench.cpp's "sizes" section
 * times it (a barrier, then enough calls to move about 16 MiB; the slowest
 * rank's time over the calls; the median of the runs), so that an MPI that
 * libddp is not built against (Intel MPI, from its PyPI wheel) can be put
 * beside libddp's rows: bench/run-mpis builds it with that MPI's compiler.
 *   mpi_allreduce_bench LABEL RUNS CSV   (appends rows as allreduce_bench's) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
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
    const int runs = atoi(argv[2]);
    FILE* csv = rank == 0 ? fopen(argv[3], "a") : NULL;
    double* seconds = malloc(sizeof(double) * (size_t)(runs + 2));
    for (long bytes = 4096; bytes <= (256L << 20); bytes *= 4) {
        const int floats = (int)(bytes / (long)sizeof(float));
        float* data = calloc((size_t)floats, sizeof(float));
        long many = (16L << 20) / bytes;
        const int calls = many < 1 ? 1 : many > 1000 ? 1000 : (int)many;
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
            fprintf(csv, "%s,%s,%d,\"MPI_Allreduce\",%.6f,%.6f,%.6f,,\n", list, argv[1], size, seconds[2 + runs / 2] * 1e3,
                    seconds[2] * 1e3, seconds[1 + runs] * 1e3);
        }
        free(data);
    }
    free(seconds);
    if (csv) fclose(csv);
    MPI_Finalize();
    return 0;
}
