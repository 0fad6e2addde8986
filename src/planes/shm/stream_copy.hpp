// A copy into the shared segment that bypasses this core's caches
// (non-temporal stores), for ranks that sit far apart: on another CCD or
// socket, a line a peer reads from this core's cache crosses the slow link
// between them, while one it reads from memory does not. Measured (2 ranks,
// 100 MB allreduce through the plane, a far placement of ~400-650 ns cache-
// line round trip): 53-62 ms with plain copies, 17 ms with these. Near
// (one shared L3) the plain copy wins on anything that fits in that cache,
// so the plane streams only where its probe (planes/shm/distance_probe.hpp)
// finds the ranks far apart.
#pragma once

#include <cstddef>

namespace ddp::shm {

/// memcpy's contract (no overlap); on return the stores are ordered before
/// any later store, so a release store of a flag publishes them.
void stream_copy(void* dst, const void* src, size_t bytes);

}  // namespace ddp::shm
