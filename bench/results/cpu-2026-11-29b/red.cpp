// Reducer steps: every gradient marked, last first, then wait (as bench/allreduce_bench's
// "libddp reducer"), with an optional busy compute of C us between marks. Medians of 15.
#include <mpi.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "ddp/ddp.h"
int main() {
    ddp_comm* w;
    if (ddp_init(nullptr, &w)) return 1;
    const int n = getenv("N") ? atoi(getenv("N")) : 2500, each = getenv("EACH") ? atoi(getenv("EACH")) : 256;
    const int compute_us = getenv("C") ? atoi(getenv("C")) : 0;
    int32_t r = 0;
    ddp_rank(w, &r);
    std::vector<std::vector<float>> t(n, std::vector<float>(each, 1.0f));
    std::vector<ddp_tensor> v;
    for (int i = 0; i < n; i++) v.push_back({t[i].data(), each, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    ddp_reducer* red = nullptr;
    if (ddp_reducer_create(w, v.data(), n, DDP_OP_SUM, nullptr, &red)) { printf("%s\n", ddp_last_error_message()); return 1; }
    std::vector<double> d;
    for (int it = 0; it < 20; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s = MPI_Wtime();
        for (int i = n; i-- > 0;) {
            if (compute_us && i % (n / 10 + 1) == 0) {
                auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(compute_us);
                while (std::chrono::steady_clock::now() < until) {}
            }
            ddp_reducer_mark_ready(red, i);
        }
        ddp_reducer_wait(red);
        double e = (MPI_Wtime() - s) * 1e6, m;
        MPI_Allreduce(&e, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (it >= 5) d.push_back(m);
    }
    std::sort(d.begin(), d.end());
    if (!r) printf("%.0f ", d[d.size() / 2]);
    ddp_reducer_free(red);
    ddp_finalize(w);
}
