// The shared-memory plane (src/planes/shm/) under mpirun on one node: which
// plane ran (the timeline names it), results bitwise equal on every rank and
// to a serial reference that combines the ranks' inputs in rank order with
// libddp's element-wise rules (with 2 ranks that is also the mpi plane's
// result, so the same run with DDP_SHM=0 checks both planes against one
// reference), every op and dtype at sizes around the plane's 1 MiB chunks,
// NaN, every collective the plane runs, and no name left in /dev/shm.
#define DDP_EXPERIMENTAL_API  // the reducer
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device/cpu/elementwise.hpp"
#include "device/cpu/half.hpp"
#include "mpi_test_main.hpp"

using mpi_test::all_dtypes;
using mpi_test::rank;
using mpi_test::size;
using mpi_test::world;

namespace {

const ddp_op reductions[] = {DDP_OP_SUM, DDP_OP_PROD, DDP_OP_MIN, DDP_OP_MAX};
constexpr int64_t chunk_bytes = 1024 * 1024;  // the plane's chunk (planes/shm/shm_plane.cpp)

size_t width(ddp_dtype dtype) { return (static_cast<unsigned>(dtype) & 0xffu) / 8; }
bool floating(ddp_dtype d) {
    return d == DDP_DTYPE_F16 || d == DDP_DTYPE_BF16 || d == DDP_DTYPE_F32 || d == DDP_DTYPE_F64;
}

/// DDP_SHM=0 turns the plane off; unset or 1, it is on (docs/shm.md).
bool shm_expected() {
    const char* setting = std::getenv("DDP_SHM");
    return size > 1 && (setting == nullptr || std::string(setting) != "0");
}

/// Element counts around the chunk: 1, one short of a chunk, one over, many
/// chunks plus a few (mostly not divisible by the ranks).
std::vector<int64_t> sizes_for(ddp_dtype dtype) {
    const int64_t per_chunk = chunk_bytes / static_cast<int64_t>(width(dtype));
    return {1, per_chunk - 1, per_chunk + 1, 2 * per_chunk + 7};
}

/// splitmix64's finalizer: cheap, well-spread bits from an index.
uint64_t mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/// Rank r's input: awkward floats (wide exponents, values that round in
/// f16/bf16, a NaN held by exactly one rank in some places), all bits for
/// integers (sums and products wrap).
std::vector<std::byte> input(int r, ddp_dtype dtype, int64_t count, bool with_nan) {
    std::vector<std::byte> data(static_cast<size_t>(count) * width(dtype));
    const uint64_t seed = static_cast<uint64_t>(r) * 1000003u + static_cast<uint64_t>(dtype) * 31u +
                          static_cast<uint64_t>(count);
    for (int64_t i = 0; i < count; ++i) {
        std::byte* at = data.data() + static_cast<size_t>(i) * width(dtype);
        const uint64_t bits = mix(seed * 0x9e3779b97f4a7c15u + static_cast<uint64_t>(i));
        if (!floating(dtype)) {
            std::memcpy(at, &bits, width(dtype));
            continue;
        }
        const double unit = static_cast<double>(bits >> 11) * 0x1p-52 - 1.0;  // in [-1, 1)
        double v = std::ldexp(unit, static_cast<int>(bits % 7) - 3);
        if (v == 0) v = 0.5;
        if (with_nan && i % 17 == 3 && (i / 17) % size == r) v = std::numeric_limits<double>::quiet_NaN();
        const auto f = static_cast<float>(v);
        switch (dtype) {
        case DDP_DTYPE_F32: std::memcpy(at, &f, 4); break;
        case DDP_DTYPE_F64: std::memcpy(at, &v, 8); break;
        case DDP_DTYPE_F16: {
            const uint16_t h = ddp::float_to_f16(f);
            std::memcpy(at, &h, 2);
            break;
        }
        default: {
            const uint16_t h = ddp::float_to_bf16(f);
            std::memcpy(at, &h, 2);
        }
        }
    }
    return data;
}

template <typename T>
void integer_combine(std::byte* acc, const std::byte* in, int64_t count, ddp_op op) {
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < count; ++i) {
        T a, b;
        std::memcpy(&a, acc + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
        std::memcpy(&b, in + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
        T r = a;
        switch (op) {
        case DDP_OP_SUM: r = static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); break;
        case DDP_OP_PROD: r = static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); break;
        case DDP_OP_MIN: r = b < a ? b : a; break;
        default: r = a < b ? b : a;
        }
        std::memcpy(acc + i * static_cast<int64_t>(sizeof(T)), &r, sizeof(T));
    }
}

/// Every rank's input combined in rank order, as the plane and libddp's rules do.
std::vector<std::byte> reference(ddp_dtype dtype, ddp_op op, int64_t count, bool with_nan) {
    std::vector<std::byte> acc = input(0, dtype, count, with_nan);
    for (int r = 1; r < size; ++r) {
        const std::vector<std::byte> in = input(r, dtype, count, with_nan);
        switch (dtype) {
        case DDP_DTYPE_I8: integer_combine<int8_t>(acc.data(), in.data(), count, op); break;
        case DDP_DTYPE_I32: integer_combine<int32_t>(acc.data(), in.data(), count, op); break;
        case DDP_DTYPE_I64: integer_combine<int64_t>(acc.data(), in.data(), count, op); break;
        case DDP_DTYPE_U8: integer_combine<uint8_t>(acc.data(), in.data(), count, op); break;
        default: ddp::reduce_into(acc.data(), in.data(), count, dtype, op);
        }
    }
    return acc;
}

ddp_tensor tensor_of(std::vector<std::byte>& data, ddp_dtype dtype) {
    return ddp_tensor{data.data(), static_cast<int64_t>(data.size() / width(dtype)), dtype, DDP_DEVICE_CPU, 0, 0};
}

/// The index of the first differing element, or -1.
int64_t first_difference(const std::vector<std::byte>& a, const std::vector<std::byte>& b, ddp_dtype dtype) {
    if (a.size() != b.size()) return -2;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return static_cast<int64_t>(i / width(dtype));
    return -1;
}

/// Whether /dev/shm holds a name libddp's segment for this job would have:
/// rank 0 creates them, and its pid is in the name.
bool segment_name_left() {
    const std::string prefix = "ddp-" + std::to_string(::getpid()) + "-";
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) return false;
    bool found = false;
    while (dirent* entry = ::readdir(dir))
        if (std::string(entry->d_name).rfind(prefix, 0) == 0) found = true;
    ::closedir(dir);
    return found;
}

/// The first event named `name` in a timeline's text, up to its closing
/// brace; empty when there is none.
std::string first_event(const std::string& text, const std::string& name) {
    const size_t at = text.find("\"" + name + "\"");
    return at == std::string::npos ? std::string() : text.substr(at, text.find('}', at) - at);
}

/// The start and end (µs) of every complete event named `name` in a
/// timeline's text, in the order written.
std::vector<std::pair<double, double>> spans_of(const std::string& text, const std::string& name) {
    std::vector<std::pair<double, double>> spans;
    for (size_t at = text.find("\"" + name + "\""); at != std::string::npos;
         at = text.find("\"" + name + "\"", at + 1)) {
        const std::string event = text.substr(at, text.find('}', at) - at);
        const size_t ts = event.find("\"ts\":"), dur = event.find("\"dur\":");
        if (ts == std::string::npos || dur == std::string::npos) continue;
        const double start = std::stod(event.substr(ts + 5));
        spans.emplace_back(start, start + std::stod(event.substr(dur + 6)));
    }
    return spans;
}

/// How many of `spans` start before the one before them (in start order) ended.
size_t overlapping(std::vector<std::pair<double, double>> spans) {
    std::sort(spans.begin(), spans.end());
    size_t count = 0;
    for (size_t i = 1; i < spans.size(); ++i)
        if (spans[i].first < spans[i - 1].second) ++count;
    return count;
}

/// This rank's timeline, started at `path` (with %r), once stopped; its file removed.
std::stringstream stopped_timeline(const std::string& path) {
    EXPECT_EQ(ddp_timeline_stop(world), DDP_OK) << mpi_test::message();
    std::string file = path;
    file.replace(file.find("%r"), 2, std::to_string(rank));
    std::stringstream text;
    text << std::ifstream(file).rdbuf();
    std::remove(file.c_str());
    return text;
}

/// Whether this run promises the reference's bits for `count` elements
/// reduced with `op`: the shm plane combines in rank order from 4 KiB up
/// (smaller calls go to the mpi plane); the mpi plane with 2 ranks has only
/// one order. Open MPI's own 8-bit SUM on large buffers does not wrap as
/// its small ones and libddp's do (measured here: it differs from the
/// reference with DDP_SHM=0), so that case is the shm plane's alone.
bool bits_promised(ddp_dtype dtype, ddp_op op, int64_t count) {
    // From 4 KiB the plane, below it agreement's shared-memory route (the
    // same rank-order combination): all of it, when the plane is on.
    if (shm_expected()) return true;
    if (size > 2) return false;
    return !(width(dtype) == 1 && op == DDP_OP_SUM && count * static_cast<int64_t>(width(dtype)) > 16 * 1024);
}

}  // namespace

TEST(Shm, TheTimelineNamesThePlaneThatRan) {
    const std::string path = "/tmp/ddp_shm_timeline_" + std::to_string(::getppid()) + ".%r.json";
    ASSERT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << mpi_test::message();
    std::vector<float> data(1 << 18, 1.0f);  // 1 MiB
    ddp_tensor tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr), DDP_OK) << mpi_test::message();
    EXPECT_EQ(data[12345], static_cast<float>(size));
    // 1 KiB rides in agreement's round, which takes the plane's route too.
    ddp_tensor small{data.data(), 256, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &small, 1, DDP_OP_SUM, nullptr), DDP_OK) << mpi_test::message();
    EXPECT_EQ(data[100], static_cast<float>(size * size));
    const std::stringstream text = stopped_timeline(path);
    const bool shm = text.str().find("\"plane\":\"shm\"") != std::string::npos;
    EXPECT_EQ(shm, shm_expected()) << "timeline: " << text.str().substr(0, 2000);
    if (!shm_expected() && size > 1) {
        EXPECT_NE(text.str().find("\"plane\":\"mpi\""), std::string::npos);
    }
    if (size > 1) {
        const std::string event = first_event(text.str(), "agreement + small allreduce");
        ASSERT_FALSE(event.empty()) << "timeline: " << text.str().substr(0, 2000);
        EXPECT_NE(event.find(shm_expected() ? "\"plane\":\"shm\"" : "\"plane\":\"mpi\""), std::string::npos)
            << event;
    }
}

// Over the MPI channel agreement's round carries allreduces of up to 16 KiB
// (the shm plane's route: 4 KiB); one element more takes a round of its own.
TEST(Shm, TheMpiRouteCarriesSixteenKibibytes) {
    if (size == 1 || shm_expected()) GTEST_SKIP() << "the MPI channel's route: 2 ranks or more, DDP_SHM=0";
    const std::string path = "/tmp/ddp_shm_carried_" + std::to_string(::getppid()) + ".%r.json";
    auto carried_bytes = [&](int64_t count) {
        EXPECT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << mpi_test::message();
        std::vector<float> data(static_cast<size_t>(count), 1.0f);
        ddp_tensor tensor{data.data(), count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr), DDP_OK) << mpi_test::message();
        EXPECT_EQ(data.back(), static_cast<float>(size));
        const std::string event = first_event(stopped_timeline(path).str(), "agreement + small allreduce");
        if (event.empty()) return std::string("none");
        EXPECT_NE(event.find("\"plane\":\"mpi\""), std::string::npos) << event;
        const size_t bytes = event.find("\"bytes\":");
        return bytes == std::string::npos ? std::string("no bytes") : event.substr(bytes + 8, 5);
    };
    EXPECT_EQ(carried_bytes(4096), "16384");
    EXPECT_EQ(carried_bytes(4097), "none");
}

// alltoall is written over the planes' exchange; from 1 MiB a step's
// sends and receives go through the segment wherever the plane is on.
TEST(Shm, AnAlltoallOfAMebibyteExchangesThroughTheSegment) {
    const std::string path = "/tmp/ddp_shm_alltoall_" + std::to_string(::getppid()) + ".%r.json";
    ASSERT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << mpi_test::message();
    const int64_t block = 300001;  // floats: more than 1 MiB per step, and no multiple of a slot
    std::vector<float> in(static_cast<size_t>(block * size)), out(in.size(), -1.0f);
    for (int to = 0; to < size; ++to)
        for (int64_t i = 0; i < block; ++i) in[static_cast<size_t>(to * block + i)] = rank * 1e6f + to * 1e3f + i % 997;
    ddp_tensor input{in.data(), static_cast<int64_t>(in.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ddp_tensor output{out.data(), static_cast<int64_t>(out.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_alltoall_tensor_list(world, &input, &output, 1, nullptr), DDP_OK) << mpi_test::message();
    for (int from = 0; from < size; ++from)
        for (int64_t i = 0; i < block; ++i)
            ASSERT_EQ(out[static_cast<size_t>(from * block + i)], from * 1e6f + rank * 1e3f + i % 997)
                << "from rank " << from << ", element " << i;
    const std::stringstream text = stopped_timeline(path);
    if (size == 1) return;
    const std::string event = first_event(text.str(), "transfer");
    ASSERT_FALSE(event.empty()) << "timeline: " << text.str().substr(0, 2000);
    EXPECT_NE(event.find(shm_expected() ? "\"plane\":\"shm\"" : "\"plane\":\"mpi\""), std::string::npos) << event;
}

TEST(Shm, NoNameIsLeftInDevShmOnceCommunicatorsExist) {
    // The name goes as soon as every rank has the segment mapped, so no
    // exit (normal, killed, timed out) can leave it behind.
    ddp_comm* node = nullptr;
    ASSERT_EQ(ddp_comm_split_node(world, nullptr, &node), DDP_OK) << mpi_test::message();
    EXPECT_FALSE(segment_name_left());
    ASSERT_EQ(ddp_comm_free(node), DDP_OK) << mpi_test::message();
}

TEST(Shm, AllreduceEveryOpAndDtypeAroundChunksBitwiseAsTheReference) {
    // With 3 or 4 ranks, MPI combines in an order of its own: only the shm
    // plane promises the rank order of the reference.
    for (ddp_dtype dtype : all_dtypes)
        for (ddp_op op : reductions)
            for (int64_t count : sizes_for(dtype))
                for (bool with_nan : {false, true}) {
                    // NaN at one size (a chunk and one) keeps the test short under load.
                    if (with_nan && (!floating(dtype) || count != sizes_for(dtype)[2])) continue;
                    if (!bits_promised(dtype, op, count)) continue;
                    std::vector<std::byte> data = input(rank, dtype, count, with_nan);
                    ddp_tensor tensor = tensor_of(data, dtype);
                    ASSERT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, op, nullptr), DDP_OK) << mpi_test::message();
                    EXPECT_EQ(first_difference(data, reference(dtype, op, count, with_nan), dtype), -1)
                        << "dtype " << dtype << " op " << op << " count " << count << " nan " << with_nan;
                }
}

TEST(Shm, ReduceBroadcastAllgatherReduceScatterAlltoallAroundChunks) {
    const int root = size - 1;
    for (ddp_dtype dtype : {DDP_DTYPE_F32, DDP_DTYPE_BF16, DDP_DTYPE_I64, DDP_DTYPE_U8})
        for (int64_t count : sizes_for(dtype)) {
            SCOPED_TRACE("dtype " + std::to_string(dtype) + " count " + std::to_string(count));
            // reduce: root gets the reference, the others keep their input;
            // roots 0 and 1 too, which read their own part in place.
            for (int reduce_root : {0, 1, root}) {
                if (reduce_root >= size || (reduce_root == root && reduce_root < 2)) continue;
                SCOPED_TRACE("reduce root " + std::to_string(reduce_root));
                std::vector<std::byte> data = input(rank, dtype, count, true);
                ddp_tensor tensor = tensor_of(data, dtype);
                ASSERT_EQ(ddp_reduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, reduce_root, nullptr), DDP_OK)
                    << mpi_test::message();
                if (rank != reduce_root || bits_promised(dtype, DDP_OP_SUM, count)) {
                    EXPECT_EQ(first_difference(data, rank == reduce_root ? reference(dtype, DDP_OP_SUM, count, true)
                                                                         : input(rank, dtype, count, true),
                                               dtype),
                              -1);
                }
            }
            // broadcast: root's input everywhere.
            std::vector<std::byte> data = input(rank, dtype, count, false);
            ddp_tensor tensor = tensor_of(data, dtype);
            ASSERT_EQ(ddp_broadcast_tensor_list(world, &tensor, 1, root, nullptr), DDP_OK) << mpi_test::message();
            EXPECT_EQ(first_difference(data, input(root, dtype, count, false), dtype), -1);
            // allgather, apart and in place: every rank's input in rank order.
            std::vector<std::byte> expected;
            for (int r = 0; r < size; ++r) {
                const std::vector<std::byte> part = input(r, dtype, count, false);
                expected.insert(expected.end(), part.begin(), part.end());
            }
            std::vector<std::byte> mine = input(rank, dtype, count, false);
            std::vector<std::byte> gathered(expected.size());
            ddp_tensor in = tensor_of(mine, dtype), out = tensor_of(gathered, dtype);
            ASSERT_EQ(ddp_allgather_tensor_list(world, &in, &out, 1, nullptr), DDP_OK) << mpi_test::message();
            EXPECT_EQ(first_difference(gathered, expected, dtype), -1);
            std::fill(gathered.begin(), gathered.end(), std::byte{0});
            std::memcpy(gathered.data() + static_cast<size_t>(rank) * mine.size(), mine.data(), mine.size());
            in.data = gathered.data() + static_cast<size_t>(rank) * mine.size();
            ASSERT_EQ(ddp_allgather_tensor_list(world, &in, &out, 1, nullptr), DDP_OK) << mpi_test::message();
            EXPECT_EQ(first_difference(gathered, expected, dtype), -1);
            // reduce_scatter: this rank's shard of the reference.
            std::vector<std::byte> whole = input(rank, dtype, count * size, true);
            std::vector<std::byte> shard(mine.size());
            in = tensor_of(whole, dtype);
            out = tensor_of(shard, dtype);
            ASSERT_EQ(ddp_reduce_scatter_tensor_list(world, &in, &out, 1, DDP_OP_MAX, nullptr), DDP_OK)
                << mpi_test::message();
            const std::vector<std::byte> all = reference(dtype, DDP_OP_MAX, count * size, true);
            const std::vector<std::byte> expected_shard(all.begin() + static_cast<ptrdiff_t>(rank * shard.size()),
                                                        all.begin() + static_cast<ptrdiff_t>((rank + 1) * shard.size()));
            if (bits_promised(dtype, DDP_OP_MAX, count * size)) {
                EXPECT_EQ(first_difference(shard, expected_shard, dtype), -1);
            }
            // alltoall: block r of the result is block `rank` of rank r's input.
            std::vector<std::byte> exchanged(whole.size());
            in = tensor_of(whole, dtype);
            out = tensor_of(exchanged, dtype);
            ASSERT_EQ(ddp_alltoall_tensor_list(world, &in, &out, 1, nullptr), DDP_OK) << mpi_test::message();
            std::vector<std::byte> expected_blocks;
            for (int r = 0; r < size; ++r) {
                const std::vector<std::byte> theirs = input(r, dtype, count * size, true);
                expected_blocks.insert(expected_blocks.end(),
                                       theirs.begin() + static_cast<ptrdiff_t>(rank * shard.size()),
                                       theirs.begin() + static_cast<ptrdiff_t>((rank + 1) * shard.size()));
            }
            EXPECT_EQ(first_difference(exchanged, expected_blocks, dtype), -1);
        }
}

TEST(Shm, FusedListsReducedWhereTheyLieBitwiseAsOneBuffer) {
    // A list cut into odd pieces, each in memory of its own, fused into
    // buckets of 1 MiB (steps that cross tensors and chunks): the plane
    // gathers and scatters them itself (planes/shm/pieces.hpp), and the
    // result must be the reference's bits, AVG included (divided per tensor).
    const std::vector<int64_t> cuts{1, 3, 1023, 70001, 5, 300000, 17, 262144, 2};
    for (ddp_dtype dtype : {DDP_DTYPE_F32, DDP_DTYPE_BF16, DDP_DTYPE_F64, DDP_DTYPE_I32})
        for (ddp_op op : {DDP_OP_SUM, DDP_OP_MAX, DDP_OP_AVG}) {
            if (op == DDP_OP_AVG && !floating(dtype)) continue;
            // A bucket of the small tensors may stay under 4 KiB and go to
            // MPI, which sums floats in an order of its own beyond 2 ranks.
            if (size > 2 && floating(dtype) && op != DDP_OP_MAX) continue;
            int64_t count = 0;
            for (int64_t cut : cuts) count += cut;
            const ddp_op reduced = op == DDP_OP_AVG ? DDP_OP_SUM : op;
            if (!bits_promised(dtype, reduced, count)) continue;
            const std::vector<std::byte> whole = input(rank, dtype, count, false);
            std::vector<std::vector<std::byte>> pieces;
            std::vector<ddp_tensor> list;
            size_t at = 0;
            for (int64_t cut : cuts) {
                const size_t bytes = static_cast<size_t>(cut) * width(dtype);
                pieces.emplace_back(whole.begin() + static_cast<ptrdiff_t>(at),
                                    whole.begin() + static_cast<ptrdiff_t>(at + bytes));
                at += bytes;
            }
            for (auto& piece : pieces) list.push_back(tensor_of(piece, dtype));
            ddp_collective_options opts;
            ddp_collective_options_init(&opts, sizeof opts);
            opts.fusion_bytes = chunk_bytes;
            ASSERT_EQ(ddp_allreduce_tensor_list(world, list.data(), static_cast<int64_t>(list.size()), op, &opts),
                      DDP_OK)
                << mpi_test::message();
            std::vector<std::byte> result;
            for (const auto& piece : pieces) result.insert(result.end(), piece.begin(), piece.end());
            std::vector<std::byte> expected = reference(dtype, reduced, count, false);
            if (op == DDP_OP_AVG)  // each element divided by the ranks, as the unpacking does
                ddp::divide_copy(expected.data(), expected.data(), count, dtype, static_cast<double>(size));
            EXPECT_EQ(first_difference(result, expected, dtype), -1) << "dtype " << dtype << " op " << op;
        }
}

TEST(Shm, ManyFusedStepsInFlightAndAsyncRequests) {
    // Fused buckets start before the previous one is waited for: two
    // operations on the plane at once, finished in start order.
    std::vector<std::vector<float>> tensors(64, std::vector<float>(20000));
    std::vector<ddp_tensor> list;
    for (size_t t = 0; t < tensors.size(); ++t) {
        for (size_t i = 0; i < tensors[t].size(); ++i) tensors[t][i] = static_cast<float>(rank + t + i % 5);
        list.push_back({tensors[t].data(), static_cast<int64_t>(tensors[t].size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    }
    ddp_request* request = nullptr;
    ASSERT_EQ(ddp_allreduce_tensor_list_async(world, list.data(), static_cast<int64_t>(list.size()), DDP_OP_SUM,
                                              nullptr, &request),
              DDP_OK)
        << mpi_test::message();
    ASSERT_EQ(ddp_request_wait(request), DDP_OK) << mpi_test::message();
    ddp_request_free(request);
    const float ranks_sum = static_cast<float>(size * (size - 1) / 2);
    for (size_t t = 0; t < tensors.size(); ++t)
        for (size_t i = 0; i < tensors[t].size(); i += 997)
            ASSERT_EQ(tensors[t][i], ranks_sum + static_cast<float>(size) * static_cast<float>(t + i % 5));
}

// The plan runner keeps two steps in flight only on a plane that runs them
// alongside (HostPlane::overlaps_operations): the shm plane does; the mpi
// plane does not, so each of its steps starts after the one before ended.
TEST(Shm, TwoStepsInFlightOnlyWhereThePlaneRunsThemAlongside) {
    if (size == 1) GTEST_SKIP() << "no transfer with one rank";
    const std::string path = "/tmp/ddp_shm_in_flight_" + std::to_string(::getppid()) + ".%r.json";
    std::vector<std::vector<float>> tensors(16, std::vector<float>(100000, 1.0f));  // 400 KB each: a step each
    std::vector<ddp_tensor> list;
    for (auto& tensor : tensors)
        list.push_back({tensor.data(), static_cast<int64_t>(tensor.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    ddp_collective_options options;
    ddp_collective_options_init(&options, sizeof options);
    options.fusion_bytes = 1 << 20;
    ASSERT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << mpi_test::message();
    ASSERT_EQ(ddp_allreduce_tensor_list(world, list.data(), static_cast<int64_t>(list.size()), DDP_OP_SUM, &options),
              DDP_OK)
        << mpi_test::message();
    const std::string text = stopped_timeline(path).str();
    for (const auto& tensor : tensors) ASSERT_EQ(tensor.back(), static_cast<float>(size));
    const std::vector<std::pair<double, double>> transfers = spans_of(text, "transfer");
    ASSERT_EQ(transfers.size(), tensors.size()) << text.substr(0, 2000);
    if (shm_expected()) {
        EXPECT_EQ(overlapping(transfers), transfers.size() - 1) << "each step starts before the one before ends";
    } else {
        EXPECT_EQ(overlapping(transfers), 0u) << "the mpi plane: one step at a time";
    }
}

// The reducer keeps up to four buckets in flight, one on the mpi plane: with
// DDP_SHM=0 no bucket starts before the one before it ended.
TEST(Shm, TheReducerKeepsOneMpiPlaneBucketInFlight) {
    if (size == 1) GTEST_SKIP() << "no transfer with one rank";
    const std::string path = "/tmp/ddp_shm_reducer_" + std::to_string(::getppid()) + ".%r.json";
    std::vector<ddp_tensor> gradients(16, ddp_tensor{nullptr, 100000, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    ddp_collective_options options;
    ddp_collective_options_init(&options, sizeof options);
    options.fusion_bytes = 1 << 20;  // 8 buckets of two gradients
    ddp_reducer* reducer = nullptr;
    ASSERT_EQ(ddp_reducer_create(world, gradients.data(), static_cast<int64_t>(gradients.size()), DDP_OP_SUM,
                                 &options, &reducer),
              DDP_OK)
        << mpi_test::message();
    ASSERT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << mpi_test::message();
    for (int64_t i = static_cast<int64_t>(gradients.size()); i-- > 0;) {
        ddp_tensor storage{};
        ASSERT_EQ(ddp_reducer_gradient(reducer, i, &storage), DDP_OK) << mpi_test::message();
        std::fill_n(static_cast<float*>(storage.data), storage.count, 1.0f);
        ASSERT_EQ(ddp_reducer_mark_ready(reducer, i), DDP_OK) << mpi_test::message();
    }
    ASSERT_EQ(ddp_reducer_wait(reducer), DDP_OK) << mpi_test::message();
    const std::string text = stopped_timeline(path).str();
    ddp_tensor last{};
    ASSERT_EQ(ddp_reducer_gradient(reducer, 0, &last), DDP_OK) << mpi_test::message();
    EXPECT_EQ(static_cast<float*>(last.data)[99999], static_cast<float>(size));
    ddp_reducer_free(reducer);
    const std::vector<std::pair<double, double>> buckets = spans_of(text, "bucket");
    ASSERT_EQ(buckets.size(), 8u) << text.substr(0, 2000);
    if (!shm_expected()) {
        EXPECT_EQ(overlapping(buckets), 0u) << "the mpi plane: one bucket at a time";
    }
}

/// Whether process `pid` is stopped (state T in /proc/PID/stat).
bool stopped(int pid) {
    std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
    const std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const size_t name_end = stat.rfind(')');
    return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'T';
}

/// Seconds of CPU the thread behind `clock` (pthread_getcpuclockid) has used.
double cpu_seconds(clockid_t clock) {
    timespec now{};
    clock_gettime(clock, &now);
    return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

TEST(Shm, ARankWaitingForAStoppedPeerGivesItsCoreAway) {
    // A rank that spun (or only yielded) while its peer waited for a core
    // would burn the slice the peer needs (issue 31): past a short spin, a
    // waiting rank sleeps on the segment's doorbell until the peer moves.
    // The last rank stops itself (SIGSTOP) a few ms into a 64 MiB allreduce,
    // past agreement's round, in the data steps. Every other rank, once it
    // sees it stopped, measures its own calling thread's CPU for 300 ms;
    // rank 0 then resumes it (at the latest 10 s on, stopped or not).
    if (!shm_expected()) GTEST_SKIP() << "the shared-memory plane is off here";
    std::vector<float> data(16 << 20, 1.0f);
    ddp_tensor tensor{data.data(), static_cast<int64_t>(data.size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    std::vector<int32_t> pids(static_cast<size_t>(size));
    int32_t mine = ::getpid();
    ddp_tensor my_pid{&mine, 1, DDP_DTYPE_I32, DDP_DEVICE_CPU, 0, 0};
    ddp_tensor every_pid{pids.data(), size, DDP_DTYPE_I32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allgather_tensor_list(world, &my_pid, &every_pid, 1, nullptr), DDP_OK) << mpi_test::message();
    const bool stops = rank == size - 1;
    clockid_t caller_clock{};
    ASSERT_EQ(pthread_getcpuclockid(pthread_self(), &caller_clock), 0);
    bool seen_stopped = false;
    double window_cpu_s = 0;
    std::thread watcher([&] {
        if (stops) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
            ::kill(::getpid(), SIGSTOP);
            return;
        }
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!(seen_stopped = stopped(pids.back())) && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const double before = cpu_seconds(caller_clock);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        window_cpu_s = cpu_seconds(caller_clock) - before;
        if (rank == 0) ::kill(pids.back(), SIGCONT);
    });
    const ddp_status status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr);
    watcher.join();
    ASSERT_EQ(status, DDP_OK) << mpi_test::message();
    EXPECT_EQ(data[0], static_cast<float>(size));
    if (stops) return;
    ASSERT_TRUE(seen_stopped) << "the last rank never showed as stopped";
    EXPECT_LT(window_cpu_s, 0.075) << "in 0.3 s of waiting for a stopped peer this rank used " << window_cpu_s
                                   << " s of CPU";
}

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    ddp_finalize(world);
    return result;
}
