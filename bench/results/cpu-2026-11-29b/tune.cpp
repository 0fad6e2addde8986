// The tuner's choice against each fixed size timed in a row: a list of N x
// EACH floats, 30 tuned calls (exploration, then the choice), 15 more timed,
// then 15 calls in a row of each fixed fusion size. Prints medians (us).
#include <mpi.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "ddp/ddp.h"
int main(int argc, char** argv) {
    ddp_comm* w;
    if (ddp_init(nullptr, &w)) return 1;
    const int n = argc > 1 ? atoi(argv[1]) : 2500, each = argc > 2 ? atoi(argv[2]) : 256;
    int32_t r = 0;
    ddp_rank(w, &r);
    std::vector<std::vector<float>> t(n, std::vector<float>(each, 1.0f));
    std::vector<ddp_tensor> v;
    for (int i = 0; i < n; i++) v.push_back({t[i].data(), each, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    auto run = [&](const ddp_collective_options* o) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s = MPI_Wtime();
        ddp_allreduce_tensor_list(w, v.data(), n, DDP_OP_SUM, o);
        double d = (MPI_Wtime() - s) * 1e6, m = 0;
        MPI_Allreduce(&d, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        return m;
    };
    auto median = [](std::vector<double> d) { std::sort(d.begin(), d.end()); return d[d.size() / 2]; };
    std::vector<double> first;
    for (int i = 0; i < 30; i++) first.push_back(run(nullptr));
    if (!r && getenv("SHOW_FIRST")) { for (double d : first) printf("%.0f ", d); printf("\n"); }
    std::vector<double> tuned;
    for (int i = 0; i < 15; i++) tuned.push_back(run(nullptr));
    const int64_t sizes[4] = {256 << 10, 1 << 20, 4 << 20, 16 << 20};
    double fixed[4];
    for (int k = 0; k < 4; k++) {
        ddp_collective_options o;
        ddp_collective_options_init(&o, sizeof o);
        o.fusion_bytes = sizes[k];
        std::vector<double> d;
        for (int i = 0; i < 16; i++) d.push_back(run(&o));
        d.erase(d.begin());
        fixed[k] = median(d);
    }
    if (!r) {
        double best = *std::min_element(fixed, fixed + 4);
        printf("tuned %.0f | 256K %.0f 1M %.0f 4M %.0f 16M %.0f | tuned/best %.2f\n", median(tuned), fixed[0], fixed[1],
               fixed[2], fixed[3], median(tuned) / best);
    }
    ddp_finalize(w);
}
