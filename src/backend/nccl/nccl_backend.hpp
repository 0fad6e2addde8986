// The nccl backend: NCCL moves device buffers between the ranks' GPUs; a
// host backend (mpi, or self for one process) carries the control plane
// and host buffers. NCCL is loaded at run time (nccl_library.hpp).
#pragma once

#include <memory>

#include "backend/backend.hpp"
#include "device/cuda/cuda.hpp"

namespace ddp {

/// Starts NCCL over `host`'s ranks on the rank's GPU; collective. Takes
/// `host` over on success; on failure leaves it with the caller and
/// throws, on every rank together: DDP_ERR_UNSUPPORTED when NCCL or a GPU
/// is missing (the message says which, on which rank) or two ranks share a
/// GPU that NCCL cannot share; DDP_ERR_TIMEOUT or DDP_ERR_BACKEND from
/// NCCL's setup.
std::unique_ptr<Backend> make_nccl_backend(std::unique_ptr<Backend>& host, const cuda::GpuAssignment& gpu,
                                           double timeout_s);

}  // namespace ddp
