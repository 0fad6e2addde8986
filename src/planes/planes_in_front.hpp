// The host planes a communicator puts in front of its transport's own in
// the priority list: planes that know where its ranks are (shared memory
// within one node, hierarchical across nodes). A new plane of that kind is
// its folder plus, in planes_in_front.*, its switches and one line in the
// table.
#pragma once

#include <memory>
#include <vector>

#include "planes/host_plane.hpp"
#include "planes/shm/shm_plane.hpp"
#include "planes/transport.hpp"

namespace ddp {

/// What the user allows of them, read from the environment once, at
/// ddp_init; sub-communicators take the world's.
struct PlaneSwitches {
    ShmRequest shm;             ///< DDP_SHM, DDP_SHM_STREAM
    bool hierarchical = true;   ///< DDP_HIERARCHICAL
};

/// The switches as this process's environment gives them; a bad value is
/// DDP_ERR_INVALID_ARGUMENT naming the variable (at ddp_init, where every
/// rank fails together).
PlaneSwitches plane_switches_from_environment();

/// Best first; empty when none has anything to gain. Collective over the
/// transport's ranks; `deadline` bounds their setup.
std::vector<std::unique_ptr<HostPlane>> make_planes_in_front(Transport& transport, const PlaneSwitches& switches,
                                                             Clock::time_point deadline);

/// The planes in front between the processes of a group across processes x
/// threads (thread 0 of each carries its threads' part): as for a world,
/// but never the hierarchical plane, which starts its node stages' pieces
/// as it is tested, where one process's threads may test their chains in
/// another order than another process's (planes/mixed/chain.hpp's gates
/// order starts, not tests).
std::vector<std::unique_ptr<HostPlane>> make_planes_between_processes(Transport& processes,
                                                                      const PlaneSwitches& switches,
                                                                      Clock::time_point deadline);

/// Ends the planes in front, then the transport they were made over (which
/// they may still use as they end); `peers_present` as Transport::finalize.
void finalize_in_front_then(const std::vector<std::unique_ptr<HostPlane>>& in_front, Transport& transport,
                            bool peers_present);

/// The priority list of host planes: those in front, then the transport's.
std::vector<HostPlane*> in_priority_order(const std::vector<std::unique_ptr<HostPlane>>& in_front,
                                          Transport& transport);

}  // namespace ddp
