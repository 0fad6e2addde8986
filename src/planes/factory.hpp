// The one place that maps a ddp_backend to the transport to start.
#pragma once

#include <cstdint>
#include <memory>

#include "ddp/ddp.h"
#include "planes/transport.hpp"

namespace ddp {

/// The transport to start first for `choice` (decided: not auto); for
/// nccl, the host transport beside which the nccl plane runs (NCCL itself
/// starts over it, make_nccl_plane, once every rank's settings are good).
std::unique_ptr<Transport> make_transport(ddp_backend choice, int64_t mpi_comm_fortran);

}  // namespace ddp
