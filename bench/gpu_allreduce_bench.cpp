// The GPU benchmark (issue 9), for a machine with a GPU; never run in CI.
// Under mpirun with DDP_BACKEND=nccl it compares, in one run and with the
// same NCCL library, libddp against raw NCCL: one tensor from 1 KiB to
// 1 GiB (bus bandwidth as nccl-tests computes it), and the model lists
// (ResNet-50, BERT-base, 1000 x 4 KiB) against per-tensor ncclAllReduce, one
// NCCL group, a packed flat buffer and one allreduce over the same bytes
// (the floor for views); plus the host microseconds a call takes to return.
// With DDP_BACKEND=mpi it compares libddp's staged allreduce with its floor:
// device-to-host copy, MPI_Allreduce on pinned memory, host-to-device copy.
// Copy bandwidths (device, pinned host) are printed as floors.
//   mpirun -np 2 -x DDP_BACKEND=nccl build/bench/gpu_allreduce_bench bench/models
// Prints CSV: case,size_or_list,strategy,seconds,ratio_to_reference,busbw_gbs
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ddp/ddp.h"

namespace {

int rank = 0, size = 1;
ddp_comm* world = nullptr;
cudaStream_t stream = nullptr;
ncclComm_t raw = nullptr;

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "rank %d: %s failed (%s)\n", rank, what, ddp_last_error_message());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

// Median seconds of `runs`, each ended by a stream synchronization, the slowest rank's.
double time_median(int runs, const std::function<void()>& body) {
    std::vector<double> seconds;
    for (int i = 0; i < runs + 3; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        body();
        check(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
        double took = MPI_Wtime() - start, slowest = 0;
        MPI_Allreduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 3) seconds.push_back(slowest);
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
}

double bus_gbs(double bytes, double seconds) { return 2.0 * (size - 1) / size * bytes / seconds / 1e9; }

/// A CSV field: quoted, since names such as "libddp, separate tensors" hold commas.
std::string quoted(const std::string& text) { return '"' + text + '"'; }

void row(const std::string& which, const std::string& what, const std::string& strategy, double seconds,
         double reference, double bytes) {
    if (rank == 0)
        std::printf("%s,%s,%s,%.6g,%.3f,%.2f\n", quoted(which).c_str(), quoted(what).c_str(), quoted(strategy).c_str(),
                    seconds, seconds / reference, bus_gbs(bytes, seconds));
}

std::vector<int64_t> read_model(const std::string& path) {
    std::vector<int64_t> counts;
    std::ifstream file(path);
    std::string line;
    while (std::getline(file, line)) {
        if (line.empty() || line[0] == '#') continue;
        int64_t count = 1;
        std::stringstream dims(line.substr(line.find('\t') + 1));
        std::string dim;
        while (std::getline(dims, dim, 'x')) count *= std::stoll(dim);
        counts.push_back(count);
    }
    if (counts.empty()) check(false, ("reading " + path).c_str());
    return counts;
}

ddp_collective_options options() {
    ddp_collective_options opts;
    ddp_collective_options_init(&opts, sizeof opts);
    opts.cuda_stream = stream;
    return opts;
}

void one_tensor(bool nccl) {
    for (size_t bytes = 1024; bytes <= (size_t{1} << 30); bytes *= 4) {
        void* data = nullptr;
        check(cudaMalloc(&data, bytes) == cudaSuccess, "cudaMalloc");
        const int64_t count = static_cast<int64_t>(bytes / 4);
        const ddp_tensor tensor{data, count, DDP_DTYPE_F32, DDP_DEVICE_CUDA, 0, 0};
        ddp_tensor on_device = tensor;
        ddp_device(world, &on_device.device_id);
        const ddp_collective_options opts = options();
        const int runs = bytes >= (size_t{1} << 28) ? 5 : 20;
        const double libddp = time_median(runs, [&] {
            check(ddp_allreduce_tensor_list(world, &on_device, 1, DDP_OP_SUM, &opts) == DDP_OK, "allreduce");
        });
        double reference = libddp;
        const std::string size_text = std::to_string(bytes);
        if (nccl) {
            reference = time_median(runs, [&] {
                check(ncclAllReduce(data, data, bytes / 4, ncclFloat32, ncclSum, raw, stream) == ncclSuccess,
                      "ncclAllReduce");
            });
            row("one tensor", size_text, "raw ncclAllReduce", reference, reference, static_cast<double>(bytes));
        } else {
            std::vector<float> host(bytes / 4);
            float* pinned = nullptr;
            check(cudaMallocHost(reinterpret_cast<void**>(&pinned), bytes) == cudaSuccess, "cudaMallocHost");
            reference = time_median(runs, [&] {  // the staging floor: copy, MPI, copy
                cudaMemcpyAsync(pinned, data, bytes, cudaMemcpyDeviceToHost, stream);
                cudaStreamSynchronize(stream);
                MPI_Allreduce(MPI_IN_PLACE, pinned, static_cast<int>(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                cudaMemcpyAsync(data, pinned, bytes, cudaMemcpyHostToDevice, stream);
            });
            cudaFreeHost(pinned);
            row("one tensor", size_text, "floor: copy + MPI_Allreduce + copy", reference, reference,
                static_cast<double>(bytes));
        }
        row("one tensor", size_text, nccl ? "libddp (nccl)" : "libddp (mpi, staged)", libddp, reference,
            static_cast<double>(bytes));
        if (nccl && bytes >= (size_t{16} << 20)) {
            // As nccl-tests times (and a training step runs): calls back to back, one synchronization at the end,
            // so that a call's host work overlaps the GPU's work on the one before.
            constexpr int calls = 10;
            const double raw_each = time_median(runs, [&] {
                for (int i = 0; i < calls; ++i)
                    check(ncclAllReduce(data, data, bytes / 4, ncclFloat32, ncclSum, raw, stream) == ncclSuccess,
                          "ncclAllReduce");
            }) / calls;
            const double libddp_each = time_median(runs, [&] {
                for (int i = 0; i < calls; ++i)
                    check(ddp_allreduce_tensor_list(world, &on_device, 1, DDP_OP_SUM, &opts) == DDP_OK, "allreduce");
            }) / calls;
            row("10 back to back", size_text, "raw ncclAllReduce", raw_each, raw_each, static_cast<double>(bytes));
            row("10 back to back", size_text, "libddp (nccl)", libddp_each, raw_each, static_cast<double>(bytes));
        }
        cudaFree(data);
    }
}

void lists(const std::string& models) {
    const std::vector<std::pair<std::string, std::vector<int64_t>>> all = {
        {"resnet50", read_model(models + "/resnet50.tsv")},
        {"bert-base", read_model(models + "/bert-base.tsv")},
        {"1000x4KiB", std::vector<int64_t>(1000, 1024)}};
    int32_t device = 0;
    ddp_device(world, &device);
    for (const auto& [name, counts] : all) {
        int64_t total = 0;
        for (int64_t c : counts) total += c;
        const double bytes = 4.0 * static_cast<double>(total);
        float *flat = nullptr, *separate = nullptr;
        check(cudaMalloc(reinterpret_cast<void**>(&flat), 4 * total) == cudaSuccess, "cudaMalloc");
        check(cudaMalloc(reinterpret_cast<void**>(&separate), 4 * total + 256 * counts.size()) == cudaSuccess,
              "cudaMalloc");
        std::vector<ddp_tensor> views, apart;  // views: back to back; apart: 256 bytes between tensors
        int64_t offset = 0, spaced = 0;
        for (int64_t c : counts) {
            views.push_back({flat + offset, c, DDP_DTYPE_F32, DDP_DEVICE_CUDA, device, 0});
            apart.push_back({separate + spaced, c, DDP_DTYPE_F32, DDP_DEVICE_CUDA, device, 0});
            offset += c;
            spaced += c + 64;
        }
        const ddp_collective_options opts = options();
        const int n = static_cast<int>(counts.size());
        const double floor = time_median(10, [&] {
            ncclAllReduce(flat, flat, static_cast<size_t>(total), ncclFloat32, ncclSum, raw, stream);
        });
        row("list", name, "one ncclAllReduce over the same bytes (floor)", floor, floor, bytes);
        row("list", name, "per-tensor ncclAllReduce", time_median(10, [&] {
            for (const ddp_tensor& t : apart)
                ncclAllReduce(t.data, t.data, static_cast<size_t>(t.count), ncclFloat32, ncclSum, raw, stream);
        }), floor, bytes);
        row("list", name, "one NCCL group", time_median(10, [&] {
            ncclGroupStart();
            for (const ddp_tensor& t : apart)
                ncclAllReduce(t.data, t.data, static_cast<size_t>(t.count), ncclFloat32, ncclSum, raw, stream);
            ncclGroupEnd();
        }), floor, bytes);
        row("list", name, "packed flat buffer", time_median(10, [&] {
            int64_t at = 0;
            for (const ddp_tensor& t : apart) {
                cudaMemcpyAsync(flat + at, t.data, 4 * t.count, cudaMemcpyDeviceToDevice, stream);
                at += t.count;
            }
            ncclAllReduce(flat, flat, static_cast<size_t>(total), ncclFloat32, ncclSum, raw, stream);
            at = 0;
            for (const ddp_tensor& t : apart) {
                cudaMemcpyAsync(t.data, flat + at, 4 * t.count, cudaMemcpyDeviceToDevice, stream);
                at += t.count;
            }
        }), floor, bytes);
        row("list", name, "libddp, separate tensors", time_median(10, [&] {
            check(ddp_allreduce_tensor_list(world, apart.data(), n, DDP_OP_SUM, &opts) == DDP_OK, "allreduce");
        }), floor, bytes);
        row("list", name, "libddp, views of one buffer", time_median(10, [&] {
            check(ddp_allreduce_tensor_list(world, views.data(), n, DDP_OP_SUM, &opts) == DDP_OK, "allreduce");
        }), floor, bytes);
        // Back to back (as training steps run): each call's host work overlaps the GPU's work on the one before.
        constexpr int calls = 10;
        const double floor_each = time_median(5, [&] {
            for (int i = 0; i < calls; ++i)
                ncclAllReduce(flat, flat, static_cast<size_t>(total), ncclFloat32, ncclSum, raw, stream);
        }) / calls;
        row("list, 10 back to back", name, "one ncclAllReduce over the same bytes (floor)", floor_each, floor_each,
            bytes);
        for (const auto& [strategy, list] : {std::pair{"libddp, separate tensors", &apart},
                                             std::pair{"libddp, views of one buffer", &views}}) {
            const double each = time_median(5, [&, list = list] {
                for (int i = 0; i < calls; ++i)
                    check(ddp_allreduce_tensor_list(world, list->data(), n, DDP_OP_SUM, &opts) == DDP_OK, "allreduce");
            }) / calls;
            row("list, 10 back to back", name, strategy, each, floor_each, bytes);
        }
        cudaFree(flat);
        cudaFree(separate);
    }
}

// Host seconds until a call returns (the GPU work is not waited for).
void host_overhead() {
    float* data = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&data), 4096);
    int32_t device = 0;
    ddp_device(world, &device);
    const ddp_tensor tensor{data, 1024, DDP_DTYPE_F32, DDP_DEVICE_CUDA, device, 0};
    const ddp_collective_options opts = options();
    auto per_call = [&](const std::function<void()>& call) {
        const int calls = 2000;
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        for (int i = 0; i < calls; ++i) call();
        const double took = (MPI_Wtime() - start) / calls;
        cudaStreamSynchronize(stream);
        return took;
    };
    const double nccl = per_call([&] { ncclAllReduce(data, data, 1024, ncclFloat32, ncclSum, raw, stream); });
    const double libddp = per_call([&] { ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &opts); });
    row("host time per call", "4 KiB", "raw ncclAllReduce", nccl, nccl, 4096);
    row("host time per call", "4 KiB", "libddp (agreement + enqueue)", libddp, nccl, 4096);
    // What one round of messages between the ranks costs here (agreement needs at least one).
    int64_t word = 0, sum = 0;
    const double mpi = per_call([&] { MPI_Allreduce(&word, &sum, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD); });
    row("host time per call", "8 bytes", "MPI_Allreduce on the host", mpi, nccl, 8);
    cudaFree(data);
}

void copy_floors() {
    const size_t bytes = size_t{1} << 28;
    void *a = nullptr, *b = nullptr, *pinned = nullptr;
    cudaMalloc(&a, bytes);
    cudaMalloc(&b, bytes);
    cudaMallocHost(&pinned, bytes);
    const double d2d = time_median(5, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream); });
    const double d2h = time_median(5, [&] { cudaMemcpyAsync(pinned, a, bytes, cudaMemcpyDeviceToHost, stream); });
    const double h2d = time_median(5, [&] { cudaMemcpyAsync(a, pinned, bytes, cudaMemcpyHostToDevice, stream); });
    if (rank == 0)
        std::printf("copy floor,256 MiB,device to device,%.6g,,%.1f\ncopy floor,256 MiB,device to pinned host,%.6g,,%.1f\n"
                    "copy floor,256 MiB,pinned host to device,%.6g,,%.1f\n",
                    d2d, bytes / d2d / 1e9, d2h, bytes / d2h / 1e9, h2d, bytes / h2d / 1e9);
    cudaFree(a);
    cudaFree(b);
    cudaFreeHost(pinned);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string models = argc > 1 ? argv[1] : "bench/models";
    check(ddp_init(nullptr, &world) == DDP_OK, "ddp_init");
    ddp_rank(world, &rank);
    ddp_size(world, &size);
    const char* backend = "";
    ddp_backend_name(world, &backend);
    const bool nccl = std::string(backend) == "nccl";
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
        std::fprintf(stderr, "rank %d: no GPU here: nothing to measure\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
    if (nccl) {  // raw NCCL beside libddp's, on the same ranks
        ncclUniqueId id;
        if (rank == 0) ncclGetUniqueId(&id);
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        check(ncclCommInitRank(&raw, size, id, rank) == ncclSuccess, "ncclCommInitRank");
    }
    if (rank == 0) std::printf("case,size_or_list,strategy,seconds,ratio_to_reference,busbw_gbs\n");
    copy_floors();
    one_tensor(nccl);
    if (nccl) {
        lists(models);
        host_overhead();
        ncclCommDestroy(raw);
    }
    cudaStreamDestroy(stream);
    check(ddp_finalize(world) == DDP_OK, "ddp_finalize");
    return 0;
}
