#include "core/bucket_tuning.hpp"

#include <algorithm>
#include <limits>

#include "util/dtype.hpp"

namespace ddp {

namespace {

// The whole list goes as one bucket only up to this size: the fusion
// buffer holds two buckets for the communicator's lifetime.
constexpr int64_t whole_list_cap = int64_t{32} << 20;

// The policies tried, smallest buckets first (ties keep the first):
// 256 KiB (through the shared-memory plane a 2.5 MB list of small tensors
// took 0.54x the time of 1 MiB buckets: more steps overlap packing with
// reducing; bench/run, 2 ranks); the old default 1 MiB; 4 MiB (PyTorch DDP's and Horovod's hand-made size); 16 MiB
// that also packs tensors up to 1 MiB (as 25 MB hand-made buckets do); and
// the whole list packed into one bucket (one call, as one flat buffer).
std::vector<FusionPolicy> candidate_policies(std::span<const ddp_tensor> tensors) {
    std::vector<FusionPolicy> policies = {policy_for_bucket_bytes(int64_t{256} << 10),
                                          policy_for_bucket_bytes(int64_t{1} << 20),
                                          policy_for_bucket_bytes(int64_t{4} << 20),
                                          FusionPolicy{int64_t{16} << 20, int64_t{1} << 20}};
    int64_t total = 0;
    for (const ddp_tensor& tensor : tensors) total += byte_size(tensor);
    if (total <= whole_list_cap) policies.push_back(FusionPolicy{total, std::numeric_limits<int64_t>::max()});
    return policies;
}

bool same_plan(const FusionPlan& a, const FusionPlan& b) {
    if (a.members != b.members || a.steps.size() != b.steps.size()) return false;
    for (size_t i = 0; i < a.steps.size(); ++i)
        if (a.steps[i].fused != b.steps[i].fused || a.steps[i].member_count != b.steps[i].member_count) return false;
    return true;
}

std::string size_text(int64_t bytes) {
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " B";
}

}  // namespace

// The median, not the fastest: beside other work a list in big buckets is
// fast in one call of three and a time slice slower in the others (2,500 x
// 256 floats in 4 MiB, one busy loop: 1.0 ms at best, 4.6 ms in the median,
// against 0.9 and 0.9 ms in 256 KiB buckets), while one slow call of three
// is the machine's noise. The warm-up call is left out: a candidate's first
// call grows the fusion buffer and finds the caches holding another plan's
// buffers.
uint64_t BucketTuning::median_us(const Candidate& candidate) {
    std::vector<uint64_t> timed(candidate.durations_us.begin() + 1, candidate.durations_us.end());
    std::sort(timed.begin(), timed.end());
    return timed[timed.size() / 2];
}

BucketTuning::BucketTuning(std::span<const ddp_tensor> tensors) {
    for (const FusionPolicy& policy : candidate_policies(tensors)) {
        FusionPlan plan = plan_fusion(tensors, policy);
        const bool seen = std::any_of(candidates_.begin(), candidates_.end(),
                                      [&](const Candidate& candidate) { return same_plan(candidate.plan, plan); });
        if (!seen) candidates_.push_back(Candidate{policy, std::move(plan), {}});
    }
    if (candidates_.size() == 1) chosen_ = 0;
}

// Each candidate in calls in a row, not the candidates in turn: taken in
// turn, a candidate's second call was still slow from the switch (DDP_SHM=0,
// 2,500 x 256 floats: 4 MiB buckets 1,053 us, then 570 us from the third
// call on), so the tuner kept 256 KiB buckets where 4 MiB took 0.72-0.78x
// their time (bench/results/cpu-2026-11-29b).
bool BucketTuning::record(size_t index, uint64_t agreed_us) {
    if (decided() || index != trying_) return false;
    if (agreed_us == 0) return ++unmeasured_ >= unmeasured_limit && next_candidate();
    unmeasured_ = 0;
    std::vector<uint64_t>& durations = candidates_[index].durations_us;
    durations.push_back(agreed_us);
    return durations.size() == samples + 1 && next_candidate();
}

bool BucketTuning::next_candidate() {
    unmeasured_ = 0;
    if (++trying_ < candidates_.size()) return false;
    chosen_ = 0;  // when none was timed: the first, the smallest buckets
    uint64_t best = std::numeric_limits<uint64_t>::max();
    for (size_t i = 0; i < candidates_.size(); ++i)
        if (candidates_[i].durations_us.size() == samples + 1)
            if (const uint64_t typical = median_us(candidates_[i]); typical < best) {
                best = typical;
                chosen_ = i;
            }
    return true;
}

std::string BucketTuning::summary() const {
    if (candidates_.size() == 1) return "every candidate plans this list alike: nothing to time";
    std::string text;
    for (size_t i = 0; i < candidates_.size(); ++i) {
        if (!text.empty()) text += ", ";
        text += size_text(candidates_[i].policy.bucket_bytes) + ": ";
        text += candidates_[i].durations_us.size() < samples + 1 ? std::string("not timed")
                                                    : std::to_string(median_us(candidates_[i])) + " us";
        if (i == chosen_) text += " (chosen)";
    }
    return text;
}

}  // namespace ddp
