#include "device/cuda/gpu_device.hpp"

#if DDP_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ddp {

int assign_gpu(int local_rank) {
#if DDP_WITH_CUDA
    int count = 0;
    // No driver or no device: the CPU paths still work.
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return -1;
    const int device = local_rank % count;
    if (cudaSetDevice(device) != cudaSuccess) return -1;
    return device;
#else
    (void)local_rank;
    return -1;
#endif
}

}  // namespace ddp
