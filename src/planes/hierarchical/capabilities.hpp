// What the hierarchical plane implements: allreduce, from
// hierarchical_min_bytes up (below it the three stages' latency outweighs
// what they save; see docs/benchmark.md).
#pragma once

#include <cstdint>

#include "planes/capabilities.hpp"

namespace ddp {

constexpr int64_t hierarchical_min_bytes = int64_t{1} << 20;

inline constexpr Capability hierarchical_capabilities[] = {
    {.ops = {DataOp::allreduce}, .min_bytes = hierarchical_min_bytes},
};

}  // namespace ddp
