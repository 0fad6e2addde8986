// The nccl device plane: NCCL moves device buffers between the ranks' GPUs,
// beside a host transport (mpi, or self for one process) that carries the
// control channel and host buffers. NCCL is loaded at run time
// (nccl_library.hpp).
#pragma once

#include <memory>

#include "device/cuda/cuda.hpp"
#include "planes/device_plane.hpp"
#include "planes/nccl/local_ranks.hpp"
#include "planes/transport.hpp"

namespace ddp {

/// Starts NCCL over `host`'s ranks on the rank's GPU; collective. Throws,
/// on every rank together: DDP_ERR_UNSUPPORTED when NCCL or a GPU is
/// missing (the message says which, on which rank) or two ranks share a
/// GPU that NCCL cannot share; DDP_ERR_TIMEOUT or DDP_ERR_BACKEND from
/// NCCL's setup. `gate`: shared by the communicator's ranks in this process
/// when there are several (a local group with devices), else null.
std::unique_ptr<DevicePlane> make_nccl_plane(Transport& host, const cuda::GpuAssignment& gpu, double timeout_s,
                                             std::shared_ptr<LaunchGate> gate);

}  // namespace ddp
