// How a split of a group across processes x threads makes its new groups.
// A new group is again processes x threads, which numbers each process's
// threads together: so each color's ranks, ordered by key then by rank,
// must come in runs of one process's threads, equally many from each of
// its processes. Every rank plans from every rank's color and key, so a
// split of another shape is refused on every rank alike.
#pragma once

#include <span>
#include <utility>
#include <vector>

namespace ddp::mixed {

struct ColorPlan {
    int color;
    int threads = 0;             ///< of each of its processes
    std::vector<int> processes;  ///< the parent's process numbers, in the new group's order
    std::vector<int> ranks;      ///< the parent's ranks, in the new group's order
};

/// Every color's plan, colors ascending (the order in which every process
/// makes them). `every_rank`: each rank's (color, key); `threads`: the
/// parent's threads per process. Throws DDP_ERR_UNSUPPORTED naming a color
/// whose ranks are not of that shape.
std::vector<ColorPlan> plan_split(std::span<const std::pair<int, int>> every_rank, int threads);

}  // namespace ddp::mixed
