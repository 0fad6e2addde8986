// The one way a CUDA runtime error becomes libddp's error, for the code
// built with CUDA's types (cuda_runtime.cpp and the .cu kernels); the rest
// of libddp reaches CUDA through cuda.hpp, which has none.
#pragma once

#include <cuda_runtime_api.h>

namespace ddp::cuda {

/// DDP_ERR_BACKEND "`what` failed (cudaErrorName: its description)" unless
/// `error` is cudaSuccess.
void check(cudaError_t error, const char* what);

}  // namespace ddp::cuda
