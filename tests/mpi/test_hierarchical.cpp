// The hierarchical plane: on ranks that span several nodes with several
// ranks on a node (tests/multinode's hierarchical_2x2: 2 simulated nodes x 2
// ranks), allreduce steps from hierarchical_min_bytes up go node reduce ->
// leaders' allreduce -> node broadcast, with the same results as the flat
// way and alike on every rank to the bit; on one node (every other run of
// this test), and with DDP_HIERARCHICAL=0 (multinode_hierarchical_off_2x2),
// the plane is absent. The timeline names the plane that moved each step and
// which way its node stages went: shared memory with DDP_SHM=1
// (multinode_hierarchical_2x2), MPI with DDP_SHM=0
// (multinode_hierarchical_mpi_node_2x2).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "mpi_test_main.hpp"
#include "planes/hierarchical/hierarchical_plane.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::size;
using mpi_test::world;

namespace {

/// Whether the ranks span several nodes with two or more on some node (the
/// test's launch decides; every rank computes the same), and
/// DDP_HIERARCHICAL=0 does not turn the plane off.
bool hierarchical_expected() {
    int32_t local_size = 1;
    ddp_local_size(world, &local_size);
    int32_t words[2] = {local_size < size ? 1 : 0, local_size};
    ddp_tensor tensor{words, 2, DDP_DTYPE_I32, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_MAX, nullptr), DDP_OK) << message();
    const char* allowed = std::getenv("DDP_HIERARCHICAL");
    return words[0] == 1 && words[1] >= 2 && (allowed == nullptr || std::string(allowed) != "0");
}

/// The hierarchical plane's name as the timeline should show it on this
/// rank: node stages through shared memory with DDP_SHM=1, through MPI with
/// DDP_SHM=0; just the plane's prefix where DDP_SHM is not set.
std::string hierarchical_plane_expected() {
    const char* shm = std::getenv("DDP_SHM");
    const std::string prefix = "\"plane\":\"hierarchical/";
    if (shm == nullptr) return prefix;
    return prefix + (std::string(shm) == "1" || std::string(shm) == "on" ? "shm\"" : "mpi\"");
}

/// The planes named by the timeline's transfer events of this rank's file.
std::string timeline_of(const std::string& path) {
    std::ifstream file(path + ".rank" + std::to_string(rank) + ".json");
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
}

/// Allreduces `count` f32 of small integers (exact in any order) with `op`
/// and checks every element against the serial result.
void check_allreduce(int64_t count, ddp_op op) {
    std::vector<float> data(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) data[static_cast<size_t>(i)] = static_cast<float>((rank * 5 + i) % 9 - 4);
    ddp_tensor tensor{data.data(), count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, op, nullptr), DDP_OK) << message();
    for (int64_t i = 0; i < count; ++i) {
        double expected = op == DDP_OP_MAX ? -1e9 : 0;
        for (int r = 0; r < size; ++r) {
            const double v = static_cast<double>((r * 5 + i) % 9 - 4);
            expected = op == DDP_OP_MAX ? std::max(expected, v) : expected + v;
        }
        if (op == DDP_OP_AVG) expected /= size;
        ASSERT_EQ(data[static_cast<size_t>(i)], static_cast<float>(expected)) << "element " << i << " of " << count;
    }
}

TEST(Hierarchical, LargeStepsGoTheHierarchicalWayAndSmallOnesDoNot) {
    const bool expected = hierarchical_expected();
    const std::string path = "/tmp/ddp-hierarchical-" + std::to_string(getppid());
    ASSERT_EQ(ddp_timeline_start(world, path.c_str()), DDP_OK) << message();
    const int64_t large = ddp::hierarchical_min_bytes / 4 + 3;
    check_allreduce(large, DDP_OP_SUM);
    ASSERT_EQ(ddp_timeline_stop(world), DDP_OK) << message();
    const std::string large_trace = timeline_of(path);
    EXPECT_EQ(large_trace.find("\"plane\":\"hierarchical/") != std::string::npos, expected)
        << (expected ? "the hierarchical plane did not run a 1 MiB step across nodes"
                     : "the hierarchical plane ran on one node")
        << " (rank " << rank << ", timeline: " << large_trace.substr(0, 1500) << ")";
    if (expected) {
        EXPECT_NE(large_trace.find(hierarchical_plane_expected()), std::string::npos)
            << "the node stages did not go the way DDP_SHM says: wanted " << hierarchical_plane_expected()
            << " (rank " << rank << ", timeline: " << large_trace.substr(0, 1500) << ")";
    }

    const std::string small_path = path + "-small";
    ASSERT_EQ(ddp_timeline_start(world, small_path.c_str()), DDP_OK) << message();
    check_allreduce(1000, DDP_OP_SUM);
    ASSERT_EQ(ddp_timeline_stop(world), DDP_OK) << message();
    EXPECT_EQ(timeline_of(small_path).find("\"plane\":\"hierarchical/"), std::string::npos);
    for (const std::string& each : {path, small_path})
        std::remove((each + ".rank" + std::to_string(rank) + ".json").c_str());
}

TEST(Hierarchical, ResultsAreThoseOfTheFlatWay) {
    for (ddp_op op : {DDP_OP_SUM, DDP_OP_AVG, DDP_OP_MAX})
        for (int64_t count : {ddp::hierarchical_min_bytes / 4 - 1, ddp::hierarchical_min_bytes / 4,
                              4 * ddp::hierarchical_min_bytes / 4 + 7, (int64_t{17} << 20) / 4 + 3})
            check_allreduce(count, op);
}

TEST(Hierarchical, FloatSumsAreTheSameBitsOnEveryRank) {
    // Sums that round differently in different orders: every rank must
    // still end with the leaders' bits (a hash of them, MIN and MAX alike).
    const int64_t count = (int64_t{9} << 20) / 4 + 5;
    std::mt19937 random(static_cast<uint32_t>(rank) * 7919u + 1u);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> data(static_cast<size_t>(count));
    for (float& each : data) each = value(random) * 1e3f;
    ddp_tensor tensor{data.data(), count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr), DDP_OK) << message();
    uint64_t hash = 1469598103934665603u;  // FNV-1a over the result's bytes
    for (const auto* byte = reinterpret_cast<const unsigned char*>(data.data());
         byte != reinterpret_cast<const unsigned char*>(data.data() + data.size()); ++byte)
        hash = (hash ^ *byte) * 1099511628211u;
    int64_t low = static_cast<int64_t>(hash >> 1), high = low;
    ddp_tensor low_tensor{&low, 1, DDP_DTYPE_I64, DDP_DEVICE_CPU, 0, 0};
    ddp_tensor high_tensor{&high, 1, DDP_DTYPE_I64, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &low_tensor, 1, DDP_OP_MIN, nullptr), DDP_OK) << message();
    ASSERT_EQ(ddp_allreduce_tensor_list(world, &high_tensor, 1, DDP_OP_MAX, nullptr), DDP_OK) << message();
    EXPECT_EQ(low, high) << "the ranks ended with different bits (rank " << rank << ")";
}

TEST(Hierarchical, AReducerAndAListOfLargeTensorsToo) {
    const int64_t large = ddp::hierarchical_min_bytes / 4;
    std::vector<float> a(static_cast<size_t>(large), static_cast<float>(rank + 1));
    std::vector<float> b(static_cast<size_t>(large + 5), 2.0f);
    ddp_tensor list[2] = {{a.data(), large, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
                          {b.data(), large + 5, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    ASSERT_EQ(ddp_allreduce_tensor_list(world, list, 2, DDP_OP_SUM, nullptr), DDP_OK) << message();
    EXPECT_EQ(a.front(), static_cast<float>(size * (size + 1) / 2));
    EXPECT_EQ(a.back(), static_cast<float>(size * (size + 1) / 2));
    EXPECT_EQ(b.back(), static_cast<float>(2 * size));
}

}  // namespace

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    return ddp_finalize(world) == DDP_OK ? result : 1;
}
