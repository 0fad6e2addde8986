// Built instead of the mpi folder's sources when libddp is configured with -Dmpi=disabled.
#include "util/error.hpp"
#include "planes/transport.hpp"

namespace ddp {

std::unique_ptr<Transport> make_mpi_transport(int64_t, MpiEnds) {
    fail(DDP_ERR_UNSUPPORTED, "the mpi backend is not available: libddp was built with -Dmpi=disabled");
}

bool mpi_launch_detected() { return launched_by_mpi_launcher(); }

}  // namespace ddp
