// The bucket size chosen by measurement (core/bucket_tuning.hpp) on real MPI
// ranks: results stay exact while the first calls of a list try candidate
// bucket sizes and after the choice, and every rank chooses the same size
// (read from the debug log line that names it) even when one rank is late to
// every call. Run with DDP_LOG_LEVEL=debug; with DDP_AUTOTUNE=0 no list is
// tuned and no such line appears.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "device/cpu/half.hpp"
#include "mpi_test_main.hpp"

using mpi_test::message;
using mpi_test::rank;
using mpi_test::size;
using mpi_test::world;

namespace {

// The "chosen by measurement" log lines of this rank, as libddp wrote them.
std::mutex lines_mutex;
std::vector<std::string> chosen_lines;

void keep_chosen(int32_t, const char* line, void*) {
    if (std::strstr(line, "chosen by measurement") == nullptr) return;
    const std::lock_guard lock(lines_mutex);
    chosen_lines.emplace_back(line);
}

bool autotune_on() {
    const char* text = std::getenv("DDP_AUTOTUNE");
    return text == nullptr || std::string(text) != "0";
}

// A list of mixed dtypes whose candidate plans differ: 2500 small f32
// tensors (3 buckets of 1 MiB, or one), small f64 and i32 tensors, and
// 96 KiB f64 tensors (in place with 1 or 4 MiB buckets, packed with larger).
struct MixedList {
    std::vector<std::vector<float>> f32;
    std::vector<std::vector<double>> f64;
    std::vector<std::vector<int32_t>> i32;
    std::vector<std::vector<uint16_t>> bf16;
    std::vector<ddp_tensor> tensors;

    explicit MixedList(bool integers) {
        for (int t = 0; t < 2500; ++t) f32.emplace_back(256 + t % 7);
        for (int t = 0; t < 40; ++t) f64.emplace_back(t % 4 == 0 ? 12288 : 300 + t);
        if (integers)
            for (int t = 0; t < 30; ++t) i32.emplace_back(500 + t);
        for (int t = 0; t < 20; ++t) bf16.emplace_back(700 + t);
        // Interleaved, so that buckets mix the dtypes' positions in the list.
        size_t a = 0, b = 0, c = 0, d = 0;
        while (a < f32.size() || b < f64.size() || c < i32.size() || d < bf16.size()) {
            for (int k = 0; k < 60 && a < f32.size(); ++k, ++a)
                tensors.push_back({f32[a].data(), static_cast<int64_t>(f32[a].size()), DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
            if (b < f64.size())
                tensors.push_back({f64[b].data(), static_cast<int64_t>(f64[b].size()), DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0}), ++b;
            if (c < i32.size())
                tensors.push_back({i32[c].data(), static_cast<int64_t>(i32[c].size()), DDP_DTYPE_I32, DDP_DEVICE_CPU, 0, 0}), ++c;
            if (d < bf16.size())
                tensors.push_back({bf16[d].data(), static_cast<int64_t>(bf16[d].size()), DDP_DTYPE_BF16, DDP_DEVICE_CPU, 0, 0}), ++d;
        }
    }

    // Small integers, exact in every dtype: element i of tensor t on rank r.
    static int value(int r, size_t t, size_t i, int call) { return (r + 1) * static_cast<int>((i + t + call) % 5); }

    void fill(int call) {
        for (size_t t = 0; t < f32.size(); ++t)
            for (size_t i = 0; i < f32[t].size(); ++i) f32[t][i] = static_cast<float>(value(rank, t, i, call));
        for (size_t t = 0; t < f64.size(); ++t)
            for (size_t i = 0; i < f64[t].size(); ++i) f64[t][i] = value(rank, t, i, call);
        for (size_t t = 0; t < i32.size(); ++t)
            for (size_t i = 0; i < i32[t].size(); ++i) i32[t][i] = value(rank, t, i, call);
        for (size_t t = 0; t < bf16.size(); ++t)
            for (size_t i = 0; i < bf16[t].size(); ++i)
                bf16[t][i] = ddp::float_to_bf16(static_cast<float>(value(rank, t, i, call)));
    }

    // Checks every element against the sum over ranks (divided by the ranks for AVG).
    void check(int call, bool average) const {
        const double ranks_sum = size * (size + 1) / 2.0;
        auto expected = [&](size_t t, size_t i) {
            const double sum = ranks_sum * ((i + t + call) % 5);
            return average ? sum / size : sum;
        };
        for (size_t t = 0; t < f32.size(); ++t)
            for (size_t i = 0; i < f32[t].size(); ++i)
                ASSERT_EQ(f32[t][i], static_cast<float>(expected(t, i))) << "f32 tensor " << t << " call " << call;
        for (size_t t = 0; t < f64.size(); ++t)
            for (size_t i = 0; i < f64[t].size(); ++i)
                ASSERT_EQ(f64[t][i], expected(t, i)) << "f64 tensor " << t << " call " << call;
        for (size_t t = 0; t < i32.size(); ++t)
            for (size_t i = 0; i < i32[t].size(); ++i)
                ASSERT_EQ(i32[t][i], static_cast<int32_t>(expected(t, i))) << "i32 tensor " << t << " call " << call;
        for (size_t t = 0; t < bf16.size(); ++t)
            for (size_t i = 0; i < bf16[t].size(); ++i)
                ASSERT_EQ(ddp::bf16_to_float(bf16[t][i]), static_cast<float>(expected(t, i)))
                    << "bf16 tensor " << t << " call " << call;
    }
};

// Runs `calls` allreduces of the list with `op`, checking each, rank 0
// sleeping before each call when `late_rank`.
void run_calls(MixedList& list, ddp_op op, int calls, bool late_rank) {
    for (int call = 0; call < calls; ++call) {
        list.fill(call);
        if (late_rank && rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3 + call % 4));
        ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), static_cast<int64_t>(list.tensors.size()), op,
                                            nullptr),
                  DDP_OK)
            << message();
        list.check(call, op == DDP_OP_AVG);
    }
}

// The bucket size named in this rank's last "chosen" line (-1: none).
int64_t last_chosen_size() {
    const std::lock_guard lock(lines_mutex);
    if (chosen_lines.empty()) return -1;
    std::smatch match;
    const std::regex size_pattern("bucket size ([0-9]+) chosen by measurement");
    if (!std::regex_search(chosen_lines.back(), match, size_pattern)) return -2;
    return std::stoll(match[1]);
}

// Whether `value` is the same on every rank.
bool same_on_every_rank(int64_t value) {
    int64_t high = value, low = value;
    ddp_tensor high_tensor{&high, 1, DDP_DTYPE_I64, DDP_DEVICE_CPU, 0, 0};
    ddp_tensor low_tensor{&low, 1, DDP_DTYPE_I64, DDP_DEVICE_CPU, 0, 0};
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &high_tensor, 1, DDP_OP_MAX, nullptr), DDP_OK) << message();
    EXPECT_EQ(ddp_allreduce_tensor_list(world, &low_tensor, 1, DDP_OP_MIN, nullptr), DDP_OK) << message();
    return high == low;
}

// Forgets the "chosen" lines so far, so that a test reads only its own.
void forget_chosen_lines() {
    const std::lock_guard lock(lines_mutex);
    chosen_lines.clear();
}

// Checks that this rank chose a size (prints its lines) when lists are
// tuned, none when not, and the same one as every other rank.
void expect_the_same_choice_on_every_rank() {
    const int64_t chosen = last_chosen_size();
    {
        const std::lock_guard lock(lines_mutex);
        for (const std::string& line : chosen_lines) std::printf("%s\n", line.c_str());
    }
    if (autotune_on()) {
        EXPECT_GT(chosen, 0);
    } else {
        EXPECT_EQ(chosen, -1);
    }
    EXPECT_TRUE(same_on_every_rank(chosen)) << "rank " << rank << " chose " << chosen;
}

// Calls that decide any list: at most 5 candidates, each timed in a warm-up
// call and 3 more in a row, and one call to hand the last duration over.
constexpr int calls_to_decide = 5 * (1 + 3) + 1;

}  // namespace

// Enough calls for every candidate to be timed and then some with the
// choice, exact throughout; SUM with integers, AVG without (AVG of integers
// rounds).
TEST(BucketTuning, ResultsStayExactWhileExploringAndAfter) {
    MixedList sum_list(true), avg_list(false);
    for (int round = 0; round < calls_to_decide / 4 + 1; ++round) {
        run_calls(sum_list, DDP_OP_SUM, 4, false);
        run_calls(avg_list, DDP_OP_AVG, 4, false);
    }
    if (size == 1) return;
    EXPECT_EQ(last_chosen_size() >= 0, autotune_on()) << "chosen line: " << last_chosen_size();
}

// Rank 0 is late to every call: the ranks' own durations differ, yet the
// size each chooses is decided from agreed values only, so it is the same.
TEST(BucketTuning, EveryRankChoosesTheSameSizeWhenOneRankIsLate) {
    forget_chosen_lines();
    MixedList list(true);
    // A list of its own (one more tensor), so that tuning starts afresh.
    std::vector<float> extra(17, 0.0f);
    list.tensors.push_back({extra.data(), 17, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    run_calls(list, DDP_OP_SUM, calls_to_decide, true);
    if (size == 1) return;
    expect_the_same_choice_on_every_rank();
}

// Calls that are not tuned (a barrier, a broadcast with its own fusion
// size) between a list's tuned calls carry the last duration along until
// the next tuned call takes it: the list is still decided, alike on every
// rank, with rank 0 late to every call.
TEST(BucketTuning, UntunedCallsBetweenTunedOnesLeaveTheChoiceAlike) {
    forget_chosen_lines();
    MixedList list(true);
    // A list of its own (one more tensor, of another length than above), so
    // that tuning starts afresh.
    std::vector<float> extra(19, 0.0f);
    list.tensors.push_back({extra.data(), 19, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0});
    std::vector<double> shared(64, 0.0);
    ddp_tensor shared_tensor{shared.data(), 64, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
    ddp_collective_options own_size;
    ddp_collective_options_init(&own_size, sizeof own_size);
    own_size.fusion_bytes = 1 << 20;
    for (int call = 0; call < calls_to_decide; ++call) {
        run_calls(list, DDP_OP_SUM, 1, true);
        ASSERT_EQ(ddp_barrier(world, nullptr), DDP_OK) << message();
        ASSERT_EQ(ddp_broadcast_tensor_list(world, &shared_tensor, 1, 0, &own_size), DDP_OK) << message();
    }
    if (size == 1) return;
    expect_the_same_choice_on_every_rank();
}

// A call that names its own fusion_bytes is never tuned.
TEST(BucketTuning, AnExplicitFusionSizeIsKept) {
    forget_chosen_lines();
    MixedList list(true);
    ddp_collective_options options;
    ddp_collective_options_init(&options, sizeof options);
    options.fusion_bytes = 1 << 20;
    for (int call = 0; call < 14; ++call) {
        list.fill(call);
        ASSERT_EQ(ddp_allreduce_tensor_list(world, list.tensors.data(), static_cast<int64_t>(list.tensors.size()),
                                            DDP_OP_SUM, &options),
                  DDP_OK)
            << message();
        list.check(call, false);
    }
    EXPECT_EQ(last_chosen_size(), -1);
}

// A rank that names the default size by hand while its peers leave it to
// measurement would run other buckets: every rank fails at once, saying so.
TEST(BucketTuning, ARankWithItsOwnSizeBesidePeersThatMeasureIsAMismatch) {
    if (size == 1 || !autotune_on()) return;
    std::vector<float> a(300, 1.0f), b(300, 1.0f);
    const ddp_tensor list[] = {{a.data(), 300, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
                               {b.data(), 300, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0}};
    ddp_collective_options options;
    ddp_collective_options_init(&options, sizeof options);
    options.fusion_bytes = 1 << 20;
    EXPECT_EQ(ddp_allreduce_tensor_list(world, list, 2, DDP_OP_SUM, rank == 0 ? &options : nullptr),
              DDP_ERR_MISMATCH);
    EXPECT_NE(message().find("uses 0 (chosen by measurement)"), std::string::npos) << message();
}

int main(int argc, char** argv) {
    ddp_set_log_callback(keep_chosen, nullptr);
    mpi_test::start(argc, argv);
    const int result = RUN_ALL_TESTS();
    ddp_finalize(world);
    return result;
}
