#include "planes/planes_in_front.hpp"

#include "planes/hierarchical/hierarchical_plane.hpp"
#include "util/env.hpp"

namespace ddp {

namespace {

/// Makes one plane, or nullptr where it does not apply or is switched off.
/// Collective: every rank calls it, whether or not its plane applies here,
/// and the ranks decide together.
using MakePlane = std::unique_ptr<HostPlane> (*)(Transport& transport, const PlaneSwitches& switches,
                                                 Clock::time_point deadline);

// Best first.
constexpr MakePlane planes_in_front[] = {
    // Every rank on one node: shared memory.
    [](Transport& transport, const PlaneSwitches& switches, Clock::time_point deadline) {
        return make_shm_plane(transport.channel(), switches.shm, deadline);
    },
    // Ranks on several nodes.
    [](Transport& transport, const PlaneSwitches& switches, Clock::time_point deadline) {
        return switches.hierarchical ? make_hierarchical_plane(transport, switches.shm, deadline) : nullptr;
    },
};

}  // namespace

PlaneSwitches plane_switches_from_environment() {
    return {{env_switch("DDP_SHM"), env_switch("DDP_SHM_STREAM")}, env_switch("DDP_HIERARCHICAL").value_or(true)};
}

std::vector<std::unique_ptr<HostPlane>> make_planes_in_front(Transport& transport, const PlaneSwitches& switches,
                                                             Clock::time_point deadline) {
    std::vector<std::unique_ptr<HostPlane>> planes;
    for (MakePlane make : planes_in_front)
        if (auto plane = make(transport, switches, deadline)) planes.push_back(std::move(plane));
    return planes;
}

std::vector<std::unique_ptr<HostPlane>> make_planes_between_processes(Transport& processes,
                                                                      const PlaneSwitches& switches,
                                                                      Clock::time_point deadline) {
    PlaneSwitches between = switches;
    between.hierarchical = false;
    return make_planes_in_front(processes, between, deadline);
}

void finalize_in_front_then(const std::vector<std::unique_ptr<HostPlane>>& in_front, Transport& transport,
                            bool peers_present) {
    for (const auto& plane : in_front) plane->finalize(peers_present);
    transport.finalize(peers_present);
}

std::vector<HostPlane*> in_priority_order(const std::vector<std::unique_ptr<HostPlane>>& in_front,
                                          Transport& transport) {
    std::vector<HostPlane*> planes;
    for (const auto& plane : in_front) planes.push_back(plane.get());
    for (HostPlane* plane : transport.host_planes()) planes.push_back(plane);
    return planes;
}

}  // namespace ddp
