// The host planes a communicator puts in front of its transport's own in
// the priority list: planes that know where its ranks are (shared memory
// within one node, hierarchical across nodes). A new plane of that kind is one more line here.
#pragma once

#include <memory>
#include <vector>

#include "planes/host_plane.hpp"
#include "planes/shm/shm_plane.hpp"
#include "planes/transport.hpp"

namespace ddp {

/// Which of them the user allows (the environment, resolved at ddp_init).
struct PlanesAllowed {
    bool hierarchical = true;
    ShmRequest shm;
};

/// Best first; empty when none has anything to gain. Collective over the
/// transport's ranks; `deadline` bounds their setup.
std::vector<std::unique_ptr<HostPlane>> make_planes_in_front(Transport& transport, const PlanesAllowed& allowed,
                                                             Clock::time_point deadline);

}  // namespace ddp
