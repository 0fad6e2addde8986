#include "control/startup.hpp"

#include <vector>

#include "control/control_plane.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

// The ranks whose local step failed (this one included when
// `this_rank_failed`), after one exchange held to `timeout_s`.
std::vector<int> ranks_that_failed(ControlChannel& channel, bool this_rank_failed, double timeout_s) {
    const uint64_t mine = this_rank_failed ? 1 : 0;
    const std::vector<std::vector<uint64_t>> all = exchange_words(channel, std::span(&mine, 1), timeout_s);
    std::vector<int> failed;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].at(0) != 0) failed.push_back(static_cast<int>(r));
    return failed;
}

// "0, 2, 3"
std::string rank_list(const std::vector<int>& ranks) {
    std::string text;
    for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return text;
}

}  // namespace

std::vector<std::vector<uint64_t>> exchange_words(ControlChannel& channel, std::span<const uint64_t> words,
                                                  double timeout_s) {
    ControlPlane control(channel, timeout_s, timeout_s, default_hang_grace_s);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    std::vector<std::vector<uint64_t>> all;
    control.wait(context, channel.start_allgather_u64(words, all), WaitStyle::for_peers);
    return all;
}

void fail_together(ControlChannel& channel, const std::optional<Error>& mine, double timeout_s, ddp_status others_status,
                   const std::string& others_failed) {
    const std::vector<int> failed = ranks_that_failed(channel, mine.has_value(), timeout_s);
    if (mine) throw Error(mine->status(), "rank " + std::to_string(channel.rank()) + ": " + mine->what());
    if (!failed.empty()) fail(others_status, "rank(s) " + rank_list(failed) + " " + others_failed);
}

// Unlike finalize's wait (control/finalize_barrier.hpp), no peer announces
// its arrival here, so any notice or a dead peer ends the wait at once.
bool all_reach(ControlChannel& channel, double seconds) {
    ControlPlane control(channel, seconds, seconds, default_hang_grace_s);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    try {
        control.wait(context, channel.start_finalize_barrier(), WaitStyle::for_peers);
        return true;
    } catch (const Error&) {
        return false;
    }
}

}  // namespace ddp
