// Persistent gradient buckets (ddp_reducer_*) on real ranks: averages like
// ddp_allreduce_tensor_list whatever order each rank marks its gradients
// in, a rank that skips a gradient makes every rank fail (not hang), and
// the communicator refuses other collectives during a step.
#define DDP_EXPERIMENTAL_API
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::size;
using mpi_test::world;

namespace {

// Small and large gradients of two dtypes: several buckets at 4 KiB.
const std::vector<int64_t> counts = {3, 700, 1, 5000, 64, 0, 2000, 9};

ddp_dtype dtype_of_index(size_t i) { return i % 3 == 1 ? DDP_DTYPE_F64 : DDP_DTYPE_F32; }

class Reducer : public testing::Test {
protected:
    void SetUp() override {
        for (size_t i = 0; i < counts.size(); ++i)
            layout.push_back({nullptr, counts[i], dtype_of_index(i), DDP_DEVICE_CPU, 0, 0});
        ddp_collective_options opts;
        ddp_collective_options_init(&opts, sizeof opts);
        opts.fusion_bytes = 4096;
        ASSERT_EQ(ddp_reducer_create(world, layout.data(), static_cast<int64_t>(layout.size()), DDP_OP_AVG, &opts,
                                     &reducer),
                  DDP_OK)
            << message();
    }
    void TearDown() override { EXPECT_EQ(ddp_reducer_free(reducer), DDP_OK) << message(); }

    double contribution(int r, int step, size_t i, int64_t k) const {
        return static_cast<double>((r + 1) * (step + 2) + static_cast<int>(i) - static_cast<int>(k % 5));
    }
    void write(int step, size_t i) {
        ddp_tensor view;
        ASSERT_EQ(ddp_reducer_gradient(reducer, static_cast<int64_t>(i), &view), DDP_OK) << message();
        ASSERT_EQ(view.count, counts[i]);
        ASSERT_EQ(view.dtype, dtype_of_index(i));
        for (int64_t k = 0; k < view.count; ++k) {
            if (view.dtype == DDP_DTYPE_F32)
                static_cast<float*>(view.data)[k] = static_cast<float>(contribution(rank, step, i, k));
            else
                static_cast<double*>(view.data)[k] = contribution(rank, step, i, k);
        }
    }
    void expect_averaged(int step) {
        for (size_t i = 0; i < counts.size(); ++i) {
            ddp_tensor view;
            ASSERT_EQ(ddp_reducer_gradient(reducer, static_cast<int64_t>(i), &view), DDP_OK);
            for (int64_t k = 0; k < view.count; ++k) {
                double expected = 0;
                for (int r = 0; r < size; ++r) expected += contribution(r, step, i, k);
                expected /= size;
                const double got = view.dtype == DDP_DTYPE_F32 ? static_cast<float*>(view.data)[k]
                                                               : static_cast<double*>(view.data)[k];
                ASSERT_NEAR(got, expected, 1e-4) << "step " << step << " gradient " << i << "[" << k << "]";
            }
        }
    }

    std::vector<ddp_tensor> layout;
    ddp_reducer* reducer = nullptr;
};

TEST_F(Reducer, AveragesWhateverOrderEachRankMarksIn) {
    std::mt19937 shuffle(static_cast<unsigned>(rank) * 7919u + 1u);  // a different order on every rank
    for (int step = 0; step < 4; ++step) {
        std::vector<size_t> order(counts.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::shuffle(order.begin(), order.end(), shuffle);
        for (size_t i : order) {
            write(step, i);
            ASSERT_EQ(ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i)), DDP_OK) << message();
        }
        ASSERT_EQ(ddp_reducer_wait(reducer), DDP_OK) << message();
        expect_averaged(step);
    }
}

TEST_F(Reducer, ARankThatSkipsAGradientMakesEveryRankFail) {
    if (size == 1) GTEST_SKIP() << "needs two ranks";
    const int odd = size - 1;
    for (size_t i = 0; i < counts.size(); ++i) {
        write(0, i);
        if (rank == odd && i == 2) continue;
        ASSERT_EQ(ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i)), DDP_OK) << message();
    }
    EXPECT_EQ(ddp_reducer_wait(reducer), DDP_ERR_MISMATCH);
    EXPECT_NE(message().find("marked gradient 2 ready but rank " + std::to_string(odd) + " did not"),
              std::string::npos)
        << message();
    // The next step works.
    for (size_t i = 0; i < counts.size(); ++i) {
        write(1, i);
        ASSERT_EQ(ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i)), DDP_OK) << message();
    }
    ASSERT_EQ(ddp_reducer_wait(reducer), DDP_OK) << message();
    expect_averaged(1);
}

TEST_F(Reducer, ARankThatFailsItsStepIsNamedWithItsReason) {
    if (size == 1) GTEST_SKIP() << "needs two ranks";
    const int odd = size - 1;
    ASSERT_EQ(ddp_reducer_mark_ready(reducer, 0), DDP_OK) << message();
    if (rank == odd) {
        EXPECT_EQ(ddp_reducer_fail_step(reducer, "grads['head']: not one of the reducer's views"), DDP_OK)
            << message();
    } else {
        for (size_t i = 1; i < counts.size(); ++i)
            ASSERT_EQ(ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i)), DDP_OK) << message();
        EXPECT_EQ(ddp_reducer_wait(reducer), DDP_ERR_MISMATCH);
        EXPECT_NE(message().find("rank " + std::to_string(odd) +
                                 " failed its step (unlike rank 0): grads['head']: not one of the reducer's views"),
                  std::string::npos)
            << message();
    }
    // The next step works.
    for (size_t i = 0; i < counts.size(); ++i) {
        write(1, i);
        ASSERT_EQ(ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i)), DDP_OK) << message();
    }
    ASSERT_EQ(ddp_reducer_wait(reducer), DDP_OK) << message();
    expect_averaged(1);
}

TEST_F(Reducer, NoOtherCollectiveDuringAStepAndBadIndices) {
    write(0, 0);
    ASSERT_EQ(ddp_reducer_mark_ready(reducer, 0), DDP_OK) << message();
    EXPECT_EQ(ddp_reducer_mark_ready(reducer, 0), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("already marked"), std::string::npos) << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("reducer step is open"), std::string::npos) << message();
    EXPECT_EQ(ddp_reducer_mark_ready(reducer, 99), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("index is 99"), std::string::npos) << message();
    ddp_tensor view;
    EXPECT_EQ(ddp_reducer_gradient(reducer, -1, &view), DDP_ERR_INVALID_ARGUMENT);
    for (size_t i = 1; i < counts.size(); ++i) {
        write(0, i);
        ASSERT_EQ(ddp_reducer_mark_ready(reducer, static_cast<int64_t>(i)), DDP_OK) << message();
    }
    ASSERT_EQ(ddp_reducer_wait(reducer), DDP_OK) << message();
    expect_averaged(0);
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

// 0.x: buckets moved with no agreement, so a peer in another collective
// aborted the whole job (MPI_ERR_TRUNCATE).
TEST_F(Reducer, APeerInAnotherCollectiveIsAMismatchNotACrash) {
    if (size == 1) GTEST_SKIP() << "needs two ranks";
    const int odd = size - 1;
    ddp_status status;
    if (rank == odd) {
        float value = 1;
        ddp_tensor tensor{&value, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
        status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, nullptr);
    } else {
        write(0, counts.size() - 1);
        status = ddp_reducer_mark_ready(reducer, static_cast<int64_t>(counts.size()) - 1);
    }
    EXPECT_EQ(status, DDP_ERR_MISMATCH);
    EXPECT_NE(message().find("called reducer step but rank " + std::to_string(odd) + " called allreduce"),
              std::string::npos)
        << message();
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

TEST_F(Reducer, ASecondReducersStepWaitsForTheFirst) {
    std::vector<ddp_tensor> one = {{nullptr, 4, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    ddp_reducer* second = nullptr;
    ASSERT_EQ(ddp_reducer_create(world, one.data(), 1, DDP_OP_SUM, nullptr, &second), DDP_OK) << message();
    write(0, 0);
    ASSERT_EQ(ddp_reducer_mark_ready(reducer, 0), DDP_OK) << message();
    EXPECT_EQ(ddp_reducer_mark_ready(second, 0), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(message().find("another reducer's step is open"), std::string::npos) << message();
    EXPECT_EQ(ddp_reducer_wait(second), DDP_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(ddp_reducer_wait(reducer), DDP_OK) << message();
    ASSERT_EQ(ddp_reducer_mark_ready(second, 0), DDP_OK) << message();
    ASSERT_EQ(ddp_reducer_wait(second), DDP_OK) << message();
    EXPECT_EQ(ddp_reducer_free(second), DDP_OK);
}

TEST(ReducerCreate, DifferentListsAreAMismatchOnEveryRank) {
    if (size == 1) GTEST_SKIP() << "needs two ranks";
    std::vector<ddp_tensor> layout = {{nullptr, 10, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
                                      {nullptr, rank == size - 1 ? 11 : 12, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    ddp_reducer* reducer = nullptr;
    EXPECT_EQ(ddp_reducer_create(world, layout.data(), 2, DDP_OP_SUM, nullptr, &reducer), DDP_ERR_MISMATCH);
    EXPECT_NE(message().find("tensor 1 is f32[12]"), std::string::npos) << message();
    EXPECT_EQ(ddp_reducer_free(nullptr), DDP_OK);
}

TEST(ReducerCreate, ListsLargerThanMemoryAreOutOfMemoryNotWildPointers) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the sanitizers' allocators abort on an allocation larger than memory instead of failing it";
#endif
    const int64_t huge = (int64_t{1} << 60) - 1;
    std::vector<ddp_tensor> layout = {{nullptr, huge, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0},
                                      {nullptr, huge, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0},
                                      {nullptr, 3, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0}};
    ddp_reducer* reducer = nullptr;
    // 0.x's bucket arithmetic wrapped round and gave them an 8-byte bucket.
    ddp_collective_options one_bucket;
    ddp_collective_options_init(&one_bucket, sizeof one_bucket);
    one_bucket.fusion_bytes = INT64_MAX;
    for (const ddp_collective_options* opts : {static_cast<const ddp_collective_options*>(nullptr),
                                               static_cast<const ddp_collective_options*>(&one_bucket)}) {
        EXPECT_EQ(ddp_reducer_create(world, layout.data(), 3, DDP_OP_SUM, opts, &reducer), DDP_ERR_OUT_OF_MEMORY);
        EXPECT_NE(message().find("out of memory"), std::string::npos) << message();
    }
    EXPECT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
}

}  // namespace

int main(int argc, char** argv) {
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    return ddp_finalize(world) == DDP_OK ? result : 7;
}
