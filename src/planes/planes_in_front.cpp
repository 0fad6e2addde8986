#include "planes/planes_in_front.hpp"

#include "planes/hierarchical/hierarchical_plane.hpp"
#include "planes/shm/shm_plane.hpp"

namespace ddp {

namespace {

struct PlaneInFront {
    /// Collective: every rank calls it, whether or not its plane applies
    /// here, and the ranks decide together.
    std::unique_ptr<HostPlane> (*make)(Transport& transport, Clock::time_point deadline);
    /// Reads the plane's switches, refusing a bad value (at ddp_init, where
    /// every rank fails together).
    void (*check_environment)();
};

// Best first.
constexpr PlaneInFront planes_in_front[] = {
    {make_shm_plane_in_front, [] { shm_request_from_environment(); }},  // every rank on one node
    {make_hierarchical_plane_in_front, [] { hierarchical_switch_from_environment(); }},  // several nodes
};

}  // namespace

std::vector<std::unique_ptr<HostPlane>> make_planes_in_front(Transport& transport, Clock::time_point deadline) {
    std::vector<std::unique_ptr<HostPlane>> planes;
    for (const PlaneInFront& in_front : planes_in_front)
        if (auto plane = in_front.make(transport, deadline)) planes.push_back(std::move(plane));
    return planes;
}

void check_planes_environment() {
    for (const PlaneInFront& in_front : planes_in_front) in_front.check_environment();
}

}  // namespace ddp
