#include "planes/planes_in_front.hpp"

#include "planes/hierarchical/hierarchical_plane.hpp"
#include "planes/shm/shm_plane.hpp"

namespace ddp {

std::vector<std::unique_ptr<HostPlane>> make_planes_in_front(Transport& transport, const PlanesAllowed& allowed,
                                                             Clock::time_point deadline) {
    std::vector<std::unique_ptr<HostPlane>> planes;
    // Every rank on one node: shared memory (make_shm_plane is collective,
    // so every rank calls it, allowed or not, and they decide together).
    if (auto shm = make_shm_plane(transport.channel(), allowed.shm, deadline)) planes.push_back(std::move(shm));
    if (allowed.hierarchical)
        if (auto hierarchical = make_hierarchical_plane(transport, allowed.shm, deadline))
            planes.push_back(std::move(hierarchical));
    return planes;
}

}  // namespace ddp
