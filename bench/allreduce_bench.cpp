// Times ddp_allreduce_tensor_list against what a user could do by hand with
// MPI, on real models' gradient lists, in one run:
//   (a) one MPI_Allreduce per tensor (FluxMPI, Lux),
//   (b) packing into fixed buckets of 1, 4 and 25 MB (Horovod, PyTorch DDP),
//   (c) one MPI_Allreduce over a buffer that already holds every gradient,
// plus memcpy of the same bytes (the memory-bandwidth floor), the per-call
// overhead against a bare 4-byte MPI_Allreduce, and how much of the
// communication an async allreduce leaves exposed behind compute; and
// allgather, reduce_scatter and alltoall against MPI_Allgather,
// MPI_Reduce_scatter_block and MPI_Alltoall on the same bytes; and one buffer of 4 KiB to
// 256 MiB against a bare MPI_Allreduce (the shared-memory plane's rows); and,
// built with OpenBLAS, whole training steps whose backward pass is a GEMM on
// every core while the reducer works (section gemm).
// Each row also carries the cache-line round trip between ranks 0 and 1
// measured just before it: on a virtual machine the host may place the two
// vCPUs near each other (~100 ns) or far apart (~500 ns) and move them while
// a job runs, which changes every strategy's time several-fold; compare
// rows measured in the same placement.
//
//   mpirun -np 2 --mca btl self,vader build/bench/allreduce_bench MODELS_DIR LABEL RUNS CSV
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define DDP_EXPERIMENTAL_API  // ddp_reducer_*
#include "ddp/ddp.h"
#ifdef DDP_BENCH_BLAS
#include <cblas.h>
#endif

namespace {

int rank = 0, size = 1;
ddp_comm* world = nullptr;

// Ranks 0 and 1 bounce a counter through one cache line of an MPI shared
// window; the median round trip in ns (0 where they share no node).
class RoundTrip {
public:
    RoundTrip() {
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_);
        int node_rank = 0;
        MPI_Comm_rank(node_, &node_rank);
        const bool shares_with_0 = (rank == 0 || rank == 1) && node_rank == rank;
        int both = 0, mine = shares_with_0 ? 1 : 0;
        MPI_Allreduce(&mine, &both, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        usable_ = both == 2;
        void* base = nullptr;
        MPI_Win_allocate_shared(node_rank == 0 ? 256 : 0, 1, MPI_INFO_NULL, node_, &base, &window_);
        MPI_Aint bytes = 0;
        int unit = 0;
        MPI_Win_shared_query(window_, 0, &bytes, &unit, &base);
        line_ = static_cast<int64_t*>(base);
    }
    ~RoundTrip() {
        MPI_Win_free(&window_);
        MPI_Comm_free(&node_);
    }
    double measure() {
        double ns = 0;
        if (usable_ && rank < 2) {
            std::atomic_ref<int64_t> ping(line_[0]), pong(line_[8]);
            constexpr int64_t bounces = 20000;
            if (rank == 0) ping.store(0), pong.store(0);
            MPI_Barrier(MPI_COMM_WORLD);
            const double start = MPI_Wtime();
            for (int64_t k = 1; k <= bounces; ++k) {
                if (rank == 0) {
                    ping.store(k, std::memory_order_release);
                    while (pong.load(std::memory_order_acquire) != k) {}
                } else {
                    while (ping.load(std::memory_order_acquire) != k) {}
                    pong.store(k, std::memory_order_release);
                }
            }
            ns = (MPI_Wtime() - start) * 1e9 / bounces;
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        MPI_Bcast(&ns, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        return ns;
    }

private:
    MPI_Comm node_ = MPI_COMM_NULL;
    MPI_Win window_ = MPI_WIN_NULL;
    int64_t* line_ = nullptr;
    bool usable_ = false;
};
RoundTrip* round_trip = nullptr;
double last_round_trip_ns = 0;  ///< measured before the cell being timed

struct GradientList {
    std::string name;
    std::vector<int64_t> counts;
    int64_t total() const {
        int64_t sum = 0;
        for (int64_t c : counts) sum += c;
        return sum;
    }
};

// One "name<TAB>AxBxC" line per parameter tensor; '#' lines are comments.
GradientList read_model(const std::string& name, const std::string& path) {
    GradientList list{name, {}};
    std::ifstream file(path);
    std::string line;
    while (std::getline(file, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::string shape = line.substr(line.find('\t') + 1);
        int64_t count = 1;
        std::stringstream dims(shape);
        std::string dim;
        while (std::getline(dims, dim, 'x')) count *= std::stoll(dim);
        list.counts.push_back(count);
    }
    if (list.counts.empty()) {
        std::fprintf(stderr, "no tensors in %s\n", path.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return list;
}

struct Stats {
    double median, min, max;
};

// Seconds per run: the slowest rank's time, after a barrier, median of `runs`.
Stats time_runs(int warmup, int runs, const std::function<void()>& body) {
    std::vector<double> seconds;
    for (int i = 0; i < warmup + runs; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        body();
        double elapsed = MPI_Wtime() - start;
        MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= warmup) seconds.push_back(elapsed);
    }
    std::sort(seconds.begin(), seconds.end());
    return {seconds[seconds.size() / 2], seconds.front(), seconds.back()};
}

struct Buffers {
    std::vector<std::vector<float>> tensors;
    std::vector<ddp_tensor> list;
    explicit Buffers(const GradientList& g) {
        for (int64_t c : g.counts) tensors.emplace_back(static_cast<size_t>(c), 1.0f + static_cast<float>(rank));
        for (auto& t : tensors) list.push_back({t.data(), static_cast<int64_t>(t.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    }
};

void per_tensor(Buffers& b) {
    for (auto& t : b.tensors)
        MPI_Allreduce(MPI_IN_PLACE, t.data(), static_cast<int>(t.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

// Horovod/DDP style: fill a bucket in list order, reduce it when full, copy back.
void bucketed(Buffers& b, std::vector<float>& bucket, size_t bucket_floats) {
    size_t used = 0, first = 0;
    auto flush = [&](size_t end) {
        if (used == 0) return;
        MPI_Allreduce(MPI_IN_PLACE, bucket.data(), static_cast<int>(used), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        size_t offset = 0;
        for (size_t i = first; i < end; ++i) {
            std::memcpy(b.tensors[i].data(), bucket.data() + offset, b.tensors[i].size() * sizeof(float));
            offset += b.tensors[i].size();
        }
        used = 0;
        first = end;
    };
    for (size_t i = 0; i < b.tensors.size(); ++i) {
        const auto& t = b.tensors[i];
        if (used > 0 && used + t.size() > bucket_floats) flush(i);
        if (t.size() > bucket.size()) bucket.resize(t.size());
        std::memcpy(bucket.data() + used, t.data(), t.size() * sizeof(float));
        used += t.size();
    }
    flush(b.tensors.size());
}

void print_row(FILE* csv, const std::string& label, const std::string& list, const std::string& strategy,
               const Stats& s, double ddp_median) {
    if (rank != 0) return;
    std::printf("%-15s %-6s %-24s %10.3f %10.3f %10.3f %8.2f\n", list.c_str(), label.c_str(), strategy.c_str(),
                s.median * 1e3, s.min * 1e3, s.max * 1e3, s.median / ddp_median);
    // The strategy is quoted: names like "libddp, views of (c)" hold commas.
    std::fprintf(csv, "%s,%s,%d,\"%s\",%.6f,%.6f,%.6f,%.4f,%.0f\n", list.c_str(), label.c_str(), size,
                 strategy.c_str(), s.median * 1e3, s.min * 1e3, s.max * 1e3, s.median / ddp_median,
                 last_round_trip_ns);
}

using Strategies = std::vector<std::pair<std::string, std::function<void()>>>;

// Rounds of every strategy in turn, so that the machine's drift touches all
// alike, in a new order each round (the same on every rank: fixed seed): a
// strategy that always ran right after memcpy would always find the caches
// flushed, and one that always ran after (a) would find the tensors cached.
// The first 2 rounds warm up; a strategy's time is its body's over `calls`.
std::vector<Stats> interleave(const Strategies& strategies, int runs, int calls = 1) {
    last_round_trip_ns = round_trip->measure();
    if (rank == 0) std::printf("# cache-line round trip rank 0 <-> 1: %.0f ns\n", last_round_trip_ns);
    std::vector<std::vector<double>> seconds(strategies.size());
    std::vector<size_t> order(strategies.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937 shuffler(12345);
    for (int round = 0; round < 2 + runs; ++round) {
        std::shuffle(order.begin(), order.end(), shuffler);
        for (size_t k : order) {
            const Stats one = time_runs(0, 1, strategies[k].second);
            if (round >= 2) seconds[k].push_back(one.median / calls);
        }
    }
    std::vector<Stats> stats;
    for (auto& v : seconds) {
        std::sort(v.begin(), v.end());
        stats.push_back({v[v.size() / 2], v.front(), v.back()});
    }
    return stats;
}

void bench_list(FILE* csv, const std::string& label, const GradientList& g, int runs) {
    Buffers b(g);
    std::vector<float> flat(static_cast<size_t>(g.total()), 1.0f), copy(flat.size());
    std::vector<std::vector<float>> buckets;
    Strategies strategies;
    strategies.emplace_back("libddp", [&] {
        ddp_allreduce_tensor_list(world, b.list.data(), static_cast<int64_t>(b.list.size()), DDP_OP_SUM, nullptr);
    });
    // libddp's own buckets at other sizes than the default, to choose the
    // default per transport from measurements.
    std::vector<ddp_collective_options> fusion_sizes;
    for (int64_t kib : {256, 4096, 16384}) {
        ddp_collective_options opts;
        ddp_collective_options_init(&opts, sizeof opts);
        opts.fusion_bytes = kib * 1024;
        fusion_sizes.push_back(opts);
    }
    for (const ddp_collective_options& opts : fusion_sizes)
        strategies.emplace_back("libddp, " + std::to_string(opts.fusion_bytes / 1024) + " KiB buckets", [&b, &opts] {
            ddp_allreduce_tensor_list(world, b.list.data(), static_cast<int64_t>(b.list.size()), DDP_OP_SUM, &opts);
        });
    strategies.emplace_back("(a) per tensor", [&] { per_tensor(b); });
    for (int mb : {1, 4, 25}) buckets.emplace_back(static_cast<size_t>(mb) * 1000 * 1000 / sizeof(float));
    for (auto& bucket : buckets)
        strategies.emplace_back("(b) " + std::to_string(bucket.size() * sizeof(float) / 1000000) + " MB buckets",
                                [&b, &bucket, floats = bucket.size()] { bucketed(b, bucket, floats); });
    strategies.emplace_back("(c) one flat buffer", [&] {
        MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    // The same list as views into (c)'s flat buffer, as a user who keeps one
    // (ComponentArrays, a destructured model) would pass it.
    std::vector<ddp_tensor> views;
    int64_t offset = 0;
    for (int64_t count : g.counts) {
        views.push_back({flat.data() + offset, count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
        offset += count;
    }
    strategies.emplace_back("libddp, views of (c)", [&] {
        ddp_allreduce_tensor_list(world, views.data(), static_cast<int64_t>(views.size()), DDP_OP_SUM, nullptr);
    });
    // Persistent buckets: the gradients already live in the reducer's
    // buckets; a step marks them all (last first) and waits.
    ddp_reducer* reducer = nullptr;
    ddp_reducer_create(world, b.list.data(), static_cast<int64_t>(b.list.size()), DDP_OP_SUM, nullptr, &reducer);
    strategies.emplace_back("libddp reducer", [&] {
        for (size_t i = b.list.size(); i-- > 0;) ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i));
        ddp_reducer_wait(reducer);
    });
    strategies.emplace_back("memcpy (floor)", [&] { std::memcpy(copy.data(), flat.data(), flat.size() * sizeof(float)); });
    // libddp chooses the list's bucket size over its first calls (at most 5
    // candidate sizes, each in 4 calls in a row, docs/buckets.md): a training
    // loop's later steps are timed.
    for (int call = 0; call < 22; ++call) strategies[0].second();
    const std::vector<Stats> stats = interleave(strategies, runs);
    for (size_t k = 0; k < strategies.size(); ++k)
        print_row(csv, label, g.name, strategies[k].first, stats[k], stats[0].median);
    ddp_reducer_free(reducer);
}

// One buffer of each size from 4 KiB to 256 MiB: libddp (the shared-memory
// plane in front when the ranks share a node, DDP_SHM=0: without it) against
// a bare MPI_Allreduce and memcpy of the same bytes, interleaved. Small sizes
// time many calls per run, so that one run is well above the clock's grain.
void bench_sizes(FILE* csv, const std::string& label, int runs) {
    for (int64_t bytes = 4096; bytes <= (int64_t{256} << 20); bytes *= 4) {
        const auto floats = static_cast<size_t>(bytes) / sizeof(float);
        std::vector<float> data(floats, 0.0f), raw(floats, 0.0f), copy(floats);
        ddp_tensor tensor{data.data(), static_cast<int64_t>(floats), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        const int calls = static_cast<int>(std::clamp<int64_t>((int64_t{16} << 20) / bytes, 1, 1000));
        Strategies strategies;
        strategies.emplace_back("libddp", [&] {
            for (int i = 0; i < calls; ++i) ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr);
        });
        strategies.emplace_back("MPI_Allreduce", [&] {
            for (int i = 0; i < calls; ++i)
                MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        });
        strategies.emplace_back("memcpy (floor)", [&] {
            for (int i = 0; i < calls; ++i) std::memcpy(copy.data(), data.data(), static_cast<size_t>(bytes));
        });
        const std::vector<Stats> stats = interleave(strategies, runs, calls);
        const std::string list = bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
        for (size_t k = 0; k < strategies.size(); ++k)
            print_row(csv, label, list, strategies[k].first, stats[k], stats[0].median);
    }
}

// Exits the job when a libddp call fails: a benchmark must not time errors.
void must(ddp_status status, const char* what) {
    if (status == DDP_OK) return;
    std::fprintf(stderr, "%s: %s: %s\n", what, ddp_status_name(status), ddp_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 2);
}

// The two halves of ZeRO and FSDP against the one MPI call a user would make
// on the same bytes: allgather in place from this rank's block (as ZeRO
// gathers its parameters) against MPI_Allgather with MPI_IN_PLACE, and
// reduce_scatter (SUM) against MPI_Reduce_scatter_block, and alltoall (the
// token exchange of mixture-of-experts layers) against MPI_Alltoall. On one f32 tensor
// of 4 KiB to 64 MiB (the whole gathered or reduced tensor), and on a model's
// list as per-tensor shards (each tensor padded to a multiple of the ranks)
// against one call on the packed bytes. The six interleave round by round;
// small cases repeat the call so that one timing moves about 4 MiB. Ends
// with a line of libddp ÷ MPI per case.
void bench_shards(FILE* csv, const std::string& label, const GradientList& model, int runs) {
    std::vector<GradientList> cases;
    for (int64_t kib : {4, 64, 1024, 16384, 65536})
        cases.push_back({kib < 1024 ? std::to_string(kib) + " KiB" : std::to_string(kib / 1024) + " MiB",
                         {kib * 1024 / 4 / size * size}});
    GradientList padded{model.name, {}};
    for (int64_t count : model.counts) padded.counts.push_back((count + size - 1) / size * size);
    cases.push_back(padded);
    std::string gather_ratios, scatter_ratios, exchange_ratios;
    for (const GradientList& c : cases) {
        const auto n = static_cast<int64_t>(c.counts.size());
        const int calls = static_cast<int>(std::clamp<int64_t>((int64_t{4} << 20) / (c.total() * 4), 1, 100));
        std::vector<std::vector<float>> full, part, exchanged;
        std::vector<ddp_tensor> fulls, parts, blocks, outs;
        for (int64_t count : c.counts) {
            full.emplace_back(static_cast<size_t>(count), 1.0f + static_cast<float>(rank));
            part.emplace_back(static_cast<size_t>(count / size));
            exchanged.emplace_back(static_cast<size_t>(count));
        }
        for (size_t i = 0; i < full.size(); ++i) {
            const int64_t count = c.counts[i], shard = count / size;
            fulls.push_back({full[i].data(), count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
            parts.push_back({part[i].data(), shard, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
            blocks.push_back({full[i].data() + rank * shard, shard, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
            outs.push_back({exchanged[i].data(), count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
        }
        std::vector<float> packed(static_cast<size_t>(c.total()), 1.0f + static_cast<float>(rank));
        std::vector<float> packed_part(packed.size() / static_cast<size_t>(size)), packed_exchanged(packed.size());
        const int shard = static_cast<int>(packed_part.size());
        const Strategies strategies{
            {"libddp allgather",
             [&] {
                 for (int i = 0; i < calls; ++i)
                     must(ddp_allgather_tensor_list(world, blocks.data(), fulls.data(), n, nullptr), "allgather");
             }},
            {"MPI_Allgather",
             [&] {
                 for (int i = 0; i < calls; ++i)
                     MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, packed.data(), shard, MPI_FLOAT, MPI_COMM_WORLD);
             }},
            {"libddp reduce_scatter",
             [&] {
                 for (int i = 0; i < calls; ++i)
                     must(ddp_reduce_scatter_tensor_list(world, fulls.data(), parts.data(), n, DDP_OP_SUM, nullptr),
                          "reduce_scatter");
             }},
            {"MPI_Reduce_scatter_block",
             [&] {
                 for (int i = 0; i < calls; ++i)
                     MPI_Reduce_scatter_block(packed.data(), packed_part.data(), shard, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
             }},
            {"libddp alltoall",
             [&] {
                 for (int i = 0; i < calls; ++i)
                     must(ddp_alltoall_tensor_list(world, fulls.data(), outs.data(), n, nullptr), "alltoall");
             }},
            {"MPI_Alltoall",
             [&] {
                 for (int i = 0; i < calls; ++i)
                     MPI_Alltoall(packed.data(), shard, MPI_FLOAT, packed_exchanged.data(), shard, MPI_FLOAT,
                                  MPI_COMM_WORLD);
             }},
        };
        const std::vector<Stats> stats = interleave(strategies, runs, calls);
        for (size_t k = 0; k < strategies.size(); ++k)
            print_row(csv, label, "shards " + c.name, strategies[k].first, stats[k], stats[k / 2 * 2].median);
        char ratio[48];
        std::snprintf(ratio, sizeof ratio, "%s%s %.2f", gather_ratios.empty() ? "" : ", ", c.name.c_str(),
                      stats[0].median / stats[1].median);
        gather_ratios += ratio;
        std::snprintf(ratio, sizeof ratio, "%s%s %.2f", scatter_ratios.empty() ? "" : ", ", c.name.c_str(),
                      stats[2].median / stats[3].median);
        scatter_ratios += ratio;
        std::snprintf(ratio, sizeof ratio, "%s%s %.2f", exchange_ratios.empty() ? "" : ", ", c.name.c_str(),
                      stats[4].median / stats[5].median);
        exchange_ratios += ratio;
    }
    if (rank == 0)
        std::printf("shards (%s, %d ranks), libddp time / MPI time: allgather %s; reduce_scatter %s; alltoall %s\n",
                    label.c_str(), size, gather_ratios.c_str(), scatter_ratios.c_str(), exchange_ratios.c_str());
}

// A simulated backward pass: the gradients appear last layer first, with
// the host idle between them (as while a GPU computes the next layer), for
// `compute_s` in all, spread by size. Each strategy is timed from the last
// gradient to every gradient reduced (the slowest rank's, median of runs).
/// A backward pass done by hand as PyTorch DDP and Horovod do it: `compute(i)`
/// makes gradient i (last to first); 4 MB buckets filled in that order, each
/// MPI_Iallreduce started when full and tested after every gradient; the
/// average written back. Returns the moment the last gradient was made.
double hand_made_backward(Buffers& b, std::vector<std::vector<float>>& buckets,
                          const std::function<void(size_t)>& compute) {
    const size_t n = b.list.size();
    const size_t bucket_floats = (4u << 20) / sizeof(float);
    std::vector<MPI_Request> requests;
    size_t used = 0, bucket = 0;
    auto start_bucket = [&] {
        requests.emplace_back();
        MPI_Iallreduce(MPI_IN_PLACE, buckets[bucket].data(), static_cast<int>(used), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &requests.back());
        ++bucket;
        used = 0;
    };
    std::vector<std::pair<size_t, size_t>> placed(n);  // tensor -> (bucket, offset)
    for (size_t i = n; i-- > 0;) {
        compute(i);
        const auto& t = b.tensors[i];
        if (used > 0 && used + t.size() > bucket_floats) start_bucket();
        if (buckets.size() <= bucket) buckets.emplace_back();
        if (buckets[bucket].size() < used + t.size()) buckets[bucket].resize(std::max(bucket_floats, used + t.size()));
        std::memcpy(buckets[bucket].data() + used, t.data(), t.size() * sizeof(float));
        placed[i] = {bucket, used};
        used += t.size();
        int done = 0;
        if (!requests.empty()) MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    }
    const double last = MPI_Wtime();
    if (used > 0) start_bucket();
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    for (size_t i = 0; i < n; ++i) {
        auto& t = b.tensors[i];
        const float* from = buckets[placed[i].first].data() + placed[i].second;
        for (size_t k = 0; k < t.size(); ++k) t[k] = from[k] / static_cast<float>(size);
    }
    return last;
}

/// The same pass through libddp's reducer: each gradient marked ready as it
/// is made. Returns the moment the last gradient was made.
double reducer_backward(Buffers& b, ddp_reducer* reducer, const std::function<void(size_t)>& compute) {
    for (size_t i = b.list.size(); i-- > 0;) {
        compute(i);
        ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i));
    }
    const double last = MPI_Wtime();
    ddp_reducer_wait(reducer);
    return last;
}

/// Over `runs` (after 2 warm-ups), the slowest rank's whole passes and
/// their tails, from the last gradient to all reduced.
struct PassTimes {
    Stats step, tail;
};
PassTimes time_passes(int runs, const std::function<double()>& backward) {
    std::vector<double> steps, tails;
    for (int i = 0; i < 2 + runs; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        const double last = backward();
        double times[2] = {MPI_Wtime() - start, MPI_Wtime() - last};
        MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 2) steps.push_back(times[0]), tails.push_back(times[1]);
    }
    auto stats = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return Stats{v[v.size() / 2], v.front(), v.back()};
    };
    return {stats(steps), stats(tails)};
}

void bench_backward(const std::string& label, const GradientList& g, int runs, double compute_s) {
    Buffers b(g);
    const auto n = b.list.size();
    double total_bytes = 0;
    for (const auto& t : b.tensors) total_bytes += static_cast<double>(t.size() * sizeof(float));
    auto idle_for = [&](size_t i) {
        const double share = static_cast<double>(b.tensors[i].size() * sizeof(float)) / total_bytes;
        std::this_thread::sleep_for(std::chrono::duration<double>(compute_s * share));
    };
    const double blocking = time_passes(runs, [&] {
        for (size_t i = n; i-- > 0;) idle_for(i);
        const double last = MPI_Wtime();
        ddp_allreduce_tensor_list(world, b.list.data(), static_cast<int64_t>(n), DDP_OP_AVG, nullptr);
        return last;
    }).tail.median;
    std::vector<std::vector<float>> buckets;
    const double hand_made = time_passes(runs, [&] { return hand_made_backward(b, buckets, idle_for); }).tail.median;
    ddp_reducer* reducer = nullptr;
    ddp_reducer_create(world, b.list.data(), static_cast<int64_t>(n), DDP_OP_AVG, nullptr, &reducer);
    const double persistent = time_passes(runs, [&] { return reducer_backward(b, reducer, idle_for); }).tail.median;
    ddp_reducer_free(reducer);
    if (rank == 0)
        std::printf("backward (%s, %d ranks, %s, %.0f ms of idle compute): from the last gradient to all reduced: "
                    "blocking at the end %.2f ms, hand-made 4 MB buckets %.2f ms (%.2fx), libddp reducer %.2f ms "
                    "(%.2fx)\n",
                    label.c_str(), size, g.name.c_str(), compute_s * 1e3, blocking * 1e3, hand_made * 1e3,
                    hand_made / blocking, persistent * 1e3, persistent / blocking);
}

#ifdef DDP_BENCH_BLAS
/// A CPU training step as users run one: the backward pass is real compute,
/// a single-precision GEMM on every core (OpenBLAS's threads), spread over
/// the gradients by size, while the gradients are reduced. Whole steps,
/// slowest rank: compute alone, libddp's reducer (overlapped), the
/// hand-made 4 MB buckets (overlapped), and compute then one blocking
/// MPI_Allreduce of a flat buffer; rows "<list>+gemm", ratios to the reducer.
void bench_gemm(FILE* csv, const std::string& label, const GradientList& g, int runs) {
    Buffers b(g);
    const auto n = b.list.size();
    constexpr int dim = 384;
    std::vector<float> A(dim * dim, 0.5f), B(dim * dim, 0.25f), C(dim * dim, 0.0f);
    auto gemm = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dim, dim, dim, 1.0f, A.data(), dim, B.data(), dim,
                    0.0f, C.data(), dim);
    };
    // As many GEMMs as one blocking allreduce of the list lasts, at least 8:
    // compute and communication of like size, so either could hide the other.
    MPI_Barrier(MPI_COMM_WORLD);
    double reduce_s = MPI_Wtime();
    ddp_allreduce_tensor_list(world, b.list.data(), static_cast<int64_t>(n), DDP_OP_AVG, nullptr);
    reduce_s = MPI_Wtime() - reduce_s;
    double gemm_s = MPI_Wtime();
    for (int k = 0; k < 4; ++k) gemm();
    gemm_s = (MPI_Wtime() - gemm_s) / 4;
    double measured[2] = {reduce_s, gemm_s};
    MPI_Allreduce(MPI_IN_PLACE, measured, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double gemms = std::max(8.0, std::round(measured[0] / measured[1]));
    double total_bytes = 0;
    for (const auto& t : b.tensors) total_bytes += static_cast<double>(t.size() * sizeof(float));
    double owed = 0;
    auto compute = [&](size_t i) {
        owed += gemms * static_cast<double>(b.tensors[i].size() * sizeof(float)) / total_bytes;
        for (; owed >= 1; owed -= 1) gemm();
    };
    auto all_compute = [&] {
        for (size_t i = n; i-- > 0;) compute(i);
        return MPI_Wtime();
    };
    std::vector<std::pair<std::string, Stats>> rows;
    rows.emplace_back("compute alone", time_passes(runs, all_compute).step);
    ddp_reducer* reducer = nullptr;
    ddp_reducer_create(world, b.list.data(), static_cast<int64_t>(n), DDP_OP_AVG, nullptr, &reducer);
    rows.emplace_back("libddp reducer", time_passes(runs, [&] { return reducer_backward(b, reducer, compute); }).step);
    ddp_reducer_free(reducer);
    std::vector<std::vector<float>> buckets;
    rows.emplace_back("(b) 4 MB buckets, overlapped",
                      time_passes(runs, [&] { return hand_made_backward(b, buckets, compute); }).step);
    std::vector<float> flat(static_cast<size_t>(g.total()));
    rows.emplace_back("(c) one flat buffer, after", time_passes(runs, [&] {
                          const double last = all_compute();
                          MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD);
                          return last;
                      }).step);
    if (rank == 0)
        std::printf("# gemm: a %dx%d sgemm on every core, %.0f of them per backward pass; whole steps\n", dim, dim,
                    gemms);
    for (const auto& [name, stats] : rows) print_row(csv, label, g.name + "+gemm", name, stats, rows[1].second.median);
}
#endif


// Per-call overhead: libddp's agreement and dispatch around a 4-byte reduction,
// with the timeline off (as every call pays it) and recording (into
// bench-results/overhead-timeline.rankR.json), against a bare MPI_Allreduce.
void bench_overhead(const std::string& label) {
    float value = 1;
    ddp_tensor one{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    const int calls = 2000;
    auto libddp = [&] {
        for (int i = 0; i < calls; ++i) ddp_allreduce_tensor_list(world, &one, 1, DDP_OP_SUM, nullptr);
    };
    const Stats ddp = time_runs(1, 7, libddp);
    const Stats mpi = time_runs(1, 7, [&] {
        for (int i = 0; i < calls; ++i) MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    if (ddp_timeline_start(world, "bench-results/overhead-timeline.json") != DDP_OK) {
        std::fprintf(stderr, "ddp_timeline_start: %s\n", ddp_last_error_message());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const Stats traced = time_runs(1, 7, libddp);
    ddp_timeline_stop(world);
    const double us = 1e6 / calls;
    if (rank == 0)
        std::printf("per-call overhead (%s, %d ranks): libddp 4-byte allreduce %.2f us (runs %.2f-%.2f), bare "
                    "MPI_Allreduce %.2f us, difference %.2f us; timeline recording %.2f us (runs %.2f-%.2f), "
                    "%.2fx the call with the timeline off\n",
                    label.c_str(), size, ddp.median * us, ddp.min * us, ddp.max * us, mpi.median * us,
                    (ddp.median - mpi.median) * us, traced.median * us, traced.min * us, traced.max * us,
                    traced.median / ddp.median);
}

// How much of an async allreduce stays exposed behind compute that keeps the
// host CPU busy (a matrix multiply sized to about the blocking call's
// length) and behind an idle host (a sleep as long as the round's blocking
// call, as while a GPU computes). Each round times, one after another: the blocking allreduce,
// the compute alone, the async allreduce beside it, the sleep alone and the
// async allreduce beside it (each the slowest rank's time); exposed is
// (beside - alone) / blocking within the round, and the median over rounds
// is reported, so that this VM's drift between rounds stays out of it.
void bench_overlap(const std::string& label, const GradientList& g, int runs) {
    Buffers b(g);
    const auto n = static_cast<int64_t>(b.list.size());
    auto blocking_allreduce = [&] { ddp_allreduce_tensor_list(world, b.list.data(), n, DDP_OP_SUM, nullptr); };
    const double blocking_s = time_runs(2, runs, blocking_allreduce).median;
    int dim = 64;
    std::vector<float> A, B, C;
    auto matmul = [&] {
        for (int i = 0; i < dim; ++i)
            for (int k = 0; k < dim; ++k) {
                const float a = A[static_cast<size_t>(i * dim + k)];
                for (int j = 0; j < dim; ++j) C[static_cast<size_t>(i * dim + j)] += a * B[static_cast<size_t>(k * dim + j)];
            }
    };
    for (;; dim = static_cast<int>(dim * 1.05) + 1) {  // 5% steps in size: at most 16% past the target in time
        A.assign(static_cast<size_t>(dim) * dim, 1.0f), B = A, C = A;
        if (time_runs(0, 1, matmul).median >= blocking_s) break;
    }
    // As long as this round's blocking call: the call's length varies by
    // 10-20% between rounds here, and a fixed sleep would time that jitter.
    std::chrono::duration<double> idle(blocking_s);
    auto sleep_idle = [&] { std::this_thread::sleep_for(idle); };
    auto beside = [&](const std::function<void()>& work) {
        return [&, work] {
            ddp_request* request = nullptr;
            ddp_allreduce_tensor_list_async(world, b.list.data(), n, DDP_OP_SUM, nullptr, &request);
            work();
            ddp_request_free(request);
        };
    };
    const auto async_beside_compute = beside(matmul), async_beside_idle = beside(sleep_idle);
    std::vector<double> exposed, idle_exposed, blocking_ms, compute_ms;
    for (int round = 0; round < runs + 1; ++round) {  // the first round warms up
        const double blocking = time_runs(0, 1, blocking_allreduce).median;
        idle = std::chrono::duration<double>(blocking);
        const double compute = time_runs(0, 1, matmul).median;
        const double with_compute = time_runs(0, 1, async_beside_compute).median;
        const double asleep = time_runs(0, 1, sleep_idle).median;
        const double with_idle = time_runs(0, 1, async_beside_idle).median;
        if (round == 0) continue;
        exposed.push_back(std::max(0.0, with_compute - compute) / blocking);
        idle_exposed.push_back(std::max(0.0, with_idle - asleep) / blocking);
        blocking_ms.push_back(blocking * 1e3);
        compute_ms.push_back(compute * 1e3);
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    if (rank == 0)
        std::printf("overlap (%s, %d ranks, %s, %d rounds): blocking allreduce %.1f ms, CPU-bound compute (%dx%d "
                    "matmul) %.1f ms; exposed behind the compute %.0f%% (rounds %.0f-%.0f%%), behind an idle host "
                    "%.0f%% (rounds %.0f-%.0f%%) (blocking: 100%%)\n",
                    label.c_str(), size, g.name.c_str(), runs, median(blocking_ms), dim, dim, median(compute_ms),
                    100 * median(exposed), 100 * *std::min_element(exposed.begin(), exposed.end()),
                    100 * *std::max_element(exposed.begin(), exposed.end()), 100 * median(idle_exposed),
                    100 * *std::min_element(idle_exposed.begin(), idle_exposed.end()),
                    100 * *std::max_element(idle_exposed.begin(), idle_exposed.end()));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5 && argc != 6) {
        std::fprintf(stderr, "usage: %s MODELS_DIR LABEL RUNS CSV [SECTIONS]\n"
                             "  SECTIONS: comma-separated sizes,lists,shards,overhead,overlap,backward,gemm (default: all)\n"
                             "  BENCH_LISTS=gpt2,2500x256 (environment): only these of the lists\n", argv[0]);
        return 2;
    }
    const std::string sections = argc == 6 ? argv[5] : "sizes,lists,shards,overhead,overlap,backward,gemm";
    auto wanted = [&](const char* section) { return sections.find(section) != std::string::npos; };
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.mpi_comm_fortran = MPI_Comm_c2f(MPI_COMM_WORLD);
    if (ddp_init(&opts, &world) != DDP_OK) {
        std::fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    auto probe = std::make_unique<RoundTrip>();
    round_trip = probe.get();
    const std::string models = argv[1], label = argv[2];
    const int runs = std::max(3, std::atoi(argv[3]));
    FILE* csv = rank == 0 ? std::fopen(argv[4], "a") : nullptr;

    // Lists of many small tensors: 1 MB and 2.5 MB (a list the old fixed
    // 1 MiB bucket split into three calls).
    GradientList tiny{"1000x256", std::vector<int64_t>(1000, 256)};
    GradientList small{"2500x256", std::vector<int64_t>(2500, 256)};
    const std::vector<GradientList> lists = {read_model("resnet50", models + "/resnet50.tsv"),
                                             read_model("bert-base", models + "/bert-base.tsv"), tiny, small,
                                             read_model("gpt2", models + "/gpt2.tsv")};
    if (rank == 0)
        std::printf("%-15s %-6s %-24s %10s %10s %10s %8s\n", "list", "btl", "strategy", "median ms", "min ms",
                    "max ms", "x libddp");
    if (wanted("sizes")) bench_sizes(csv, label, runs);
    if (wanted("lists"))
        for (const auto& g : lists)
            if (!std::getenv("BENCH_LISTS") || std::string(std::getenv("BENCH_LISTS")).find(g.name) != std::string::npos)
                bench_list(csv, label, g, runs);
    if (wanted("shards")) bench_shards(csv, label, lists[0], runs);
    if (wanted("overhead")) bench_overhead(label);
    if (wanted("overlap")) bench_overlap(label, lists[0], runs);
    if (wanted("backward"))
        for (size_t i = 0; i < 2; ++i) bench_backward(label, lists[i], runs, i == 0 ? 0.030 : 0.150);
#ifdef DDP_BENCH_BLAS
    if (wanted("gemm"))
        for (size_t i = 0; i < 2; ++i) bench_gemm(csv, label, lists[i], runs);
#else
    if (wanted("gemm") && rank == 0) std::printf("# gemm: left out, built without OpenBLAS (libopenblas-dev)\n");
#endif
    if (csv) std::fclose(csv);
    probe.reset();
    ddp_finalize(world);
    MPI_Finalize();
    return 0;
}
