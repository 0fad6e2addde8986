#include "core/clock_sync.hpp"

#include <algorithm>
#include <vector>

namespace ddp {

namespace {
constexpr int rounds = 9;
}

trace::ClockSync measure_clock_offset(ControlChannel& channel, ControlPlane& control, CallContext& context) {
    if (channel.size() == 1) return trace::ClockSync{0, 0, 0};
    std::vector<uint64_t> readings(rounds);
    for (uint64_t& reading : readings) {
        uint64_t token[1] = {0};
        control.wait(context, channel.start_max_u64(token), WaitStyle::for_data);
        reading = static_cast<uint64_t>(trace::now_ns());
    }
    std::vector<std::vector<uint64_t>> by_rank;
    control.wait(context, channel.start_allgather_u64(readings, by_rank), WaitStyle::for_data);
    std::vector<double> offsets(rounds);
    for (int i = 0; i < rounds; ++i)
        offsets[i] = (static_cast<double>(readings[i]) - static_cast<double>(by_rank[0][i])) / 1000.0;
    std::sort(offsets.begin(), offsets.end());
    return trace::ClockSync{offsets[rounds / 2], offsets.back() - offsets.front(), rounds};
}

}  // namespace ddp
