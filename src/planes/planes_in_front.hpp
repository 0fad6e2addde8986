// The host planes a communicator puts in front of its transport's own in
// the priority list: planes that know where its ranks are (shared memory
// within one node, hierarchical across nodes). Each reads its own switches
// from the environment; a new plane of that kind is its folder plus one
// line in planes_in_front.cpp.
#pragma once

#include <memory>
#include <vector>

#include "planes/host_plane.hpp"
#include "planes/transport.hpp"

namespace ddp {

/// Best first; empty when none has anything to gain. Collective over the
/// transport's ranks; `deadline` bounds their setup.
std::vector<std::unique_ptr<HostPlane>> make_planes_in_front(Transport& transport, Clock::time_point deadline);

/// Refuses a bad value in any of their switches (DDP_ERR_INVALID_ARGUMENT
/// naming the variable): called at ddp_init.
void check_planes_environment();

}  // namespace ddp
