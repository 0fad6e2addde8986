#include "control/startup.hpp"

#include "control/control_plane.hpp"
#include "util/error.hpp"

namespace ddp {

std::vector<int> ranks_that_failed(Backend& backend, bool this_rank_failed, double timeout_s) {
    ControlPlane control(backend, timeout_s, timeout_s);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    const uint64_t mine = this_rank_failed ? 1 : 0;
    std::vector<std::vector<uint64_t>> all;
    control.wait(context, backend.start_allgather_u64(std::span(&mine, 1), all), WaitStyle::for_peers);
    std::vector<int> failed;
    for (size_t r = 0; r < all.size(); ++r)
        if (all[r].at(0) != 0) failed.push_back(static_cast<int>(r));
    return failed;
}

bool all_reach(Backend& backend, double seconds) {
    ControlPlane control(backend, seconds, seconds);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    try {
        control.wait(context, backend.start_finalize_barrier(), WaitStyle::for_peers);
        return true;
    } catch (const Error&) {
        return false;
    }
}

std::string rank_list(const std::vector<int>& ranks) {
    std::string text;
    for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return text;
}

}  // namespace ddp
