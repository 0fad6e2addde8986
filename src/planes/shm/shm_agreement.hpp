// Agreement's rounds through the shared-memory segment (control/
// agreement_route.hpp): every collective's first round trip, and a small
// allreduce riding in it, in well under a microsecond between ranks of one
// node, where a round through MPI takes several.
#pragma once

#include <cstddef>
#include <memory>

#include "control/agreement_route.hpp"
#include "planes/shm/doorbell.hpp"
#include "planes/shm/segment.hpp"

namespace ddp::shm {

/// The bytes the route needs in the segment for `ranks` ranks (a multiple of 64).
size_t agreement_area_bytes(int ranks);

/// The route over the area at `offset` in `segment` (zeroed, the same on
/// every rank), for this `rank` of `size`; waiting ranks sleep on `doorbell`.
std::unique_ptr<AgreementRoute> make_shm_agreement(std::shared_ptr<const Segment> segment, size_t offset,
                                                   Doorbell doorbell, int rank, int size);

}  // namespace ddp::shm
