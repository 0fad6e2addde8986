#include "planes/mixed/split_plan.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "util/error.hpp"

namespace ddp::mixed {

namespace {

[[noreturn]] void refuse(int color, const std::vector<int>& ranks, int threads) {
    std::string order;
    for (size_t i = 0; i < ranks.size() && i < 16; ++i) order += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
    if (ranks.size() > 16) order += ", ...";
    fail(DDP_ERR_UNSUPPORTED,
         "comm_split of a group across processes x threads (" + std::to_string(threads) +
             " threads per process): the ranks of color " + std::to_string(color) + ", ordered by key (" + order +
             "), are not each process's threads together, equally many from each process, as such a group "
             "numbers its ranks; splits of other shapes are not built yet");
}

}  // namespace

std::vector<ColorPlan> plan_split(std::span<const std::pair<int, int>> every_rank, int threads) {
    std::map<int, std::vector<int>> ranks_of;  // ascending colors, each with its ranks ascending
    for (size_t rank = 0; rank < every_rank.size(); ++rank)
        if (every_rank[rank].first >= 0) ranks_of[every_rank[rank].first].push_back(static_cast<int>(rank));
    std::vector<ColorPlan> plans;
    for (auto& [color, ranks] : ranks_of) {
        std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) {
            return every_rank[static_cast<size_t>(a)].second < every_rank[static_cast<size_t>(b)].second;
        });
        ColorPlan plan{color, 0, {}, ranks};
        for (size_t at = 0; at < ranks.size();) {
            const int process = ranks[at] / threads;
            size_t end = at;
            while (end < ranks.size() && ranks[end] / threads == process) ++end;
            const int run = static_cast<int>(end - at);
            if (plan.threads == 0) plan.threads = run;
            if (run != plan.threads ||
                std::find(plan.processes.begin(), plan.processes.end(), process) != plan.processes.end())
                refuse(color, ranks, threads);
            plan.processes.push_back(process);
            at = end;
        }
        plans.push_back(std::move(plan));
    }
    return plans;
}

}  // namespace ddp::mixed
