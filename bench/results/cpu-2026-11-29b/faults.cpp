// Minor page faults per call of a 2500 x 256 list, per call index, rank 0.
#include <mpi.h>
#include <sys/resource.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "ddp/ddp.h"
static long faults() { rusage u; getrusage(RUSAGE_SELF, &u); return u.ru_minflt; }
int main() {
    ddp_comm* w;
    if (ddp_init(nullptr, &w)) return 1;
    const int n = getenv("N") ? atoi(getenv("N")) : 2500, each = getenv("EACH") ? atoi(getenv("EACH")) : 256;
    int32_t r = 0;
    ddp_rank(w, &r);
    std::vector<std::vector<float>> t(n, std::vector<float>(each, 1.0f));
    std::vector<ddp_tensor> v;
    for (int i = 0; i < n; i++) v.push_back({t[i].data(), each, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    ddp_collective_options o;
    ddp_collective_options_init(&o, sizeof o);
    o.fusion_bytes = atoll(getenv("FB") ? getenv("FB") : "0");
    std::vector<float> flat(n * each, 1.0f);
    for (int i = 0; i < (getenv("CALLS") ? atoi(getenv("CALLS")) : 20); i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        long f = faults();
        double s = MPI_Wtime();
        if (getenv("MPI_FLAT")) MPI_Allreduce(MPI_IN_PLACE, flat.data(), n * each, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        else ddp_allreduce_tensor_list(w, v.data(), n, DDP_OP_SUM, o.fusion_bytes ? &o : nullptr);
        if (!r) printf("%ld/%.0f ", faults() - f, (MPI_Wtime() - s) * 1e6);
    }
    if (!r) printf("\n");
    ddp_finalize(w);
}
