// The one place that maps a ddp_backend to a backend to start.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.hpp"
#include "ddp/ddp.h"

namespace ddp {

/// The backend to start first for `choice` (decided: not auto); for nccl,
/// the host backend that carries its control plane (NCCL itself starts
/// over it, make_nccl_backend, once every rank's settings are good).
std::unique_ptr<Backend> make_backend(ddp_backend choice, int64_t mpi_comm_fortran);

}  // namespace ddp
