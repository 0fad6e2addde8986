// AVG on the GPU: the reduced sums divided by the world size in place, as
// the CPU path does (device/cpu/elementwise.cpp): in single precision for
// f16, bf16 and f32, in double for f64, rounding once to the stored type.
// NCCL's ncclAvg is not used: it pre-scales each input in the input dtype,
// which rounds differently for f16 and bf16 (see ddp.h, ddp_op).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "device/cuda/cuda.hpp"
#include "device/cuda/cuda_check.hpp"
#include "util/error.hpp"

namespace ddp::cuda {

namespace {

struct F16 {
    using Stored = __half;
    __device__ static float to(Stored x) { return __half2float(x); }
    __device__ static Stored from(float x) { return __float2half_rn(x); }
};
struct BF16 {
    using Stored = __nv_bfloat16;
    __device__ static float to(Stored x) { return __bfloat162float(x); }
    __device__ static Stored from(float x) { return __float2bfloat16_rn(x); }
};
struct F32 {
    using Stored = float;
    __device__ static float to(Stored x) { return x; }
    __device__ static Stored from(float x) { return x; }
};
struct F64 {
    using Stored = double;
    __device__ static double to(Stored x) { return x; }
    __device__ static Stored from(double x) { return x; }
};

template <typename Format, typename Compute>
__global__ void divide_kernel(typename Format::Stored* data, int64_t count, Compute divisor) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
        data[i] = Format::from(Format::to(data[i]) / divisor);
}

// Launched through cudaLaunchKernel, whose status is this launch's own
// (cudaGetLastError would also report, and clear, an earlier caller's error).
template <typename Format, typename Compute>
cudaError_t launch(void* data, int64_t count, double divisor, void* stream) {
    constexpr unsigned threads = 256;
    constexpr int64_t max_blocks = 4096;  // grid-stride beyond: any count fits
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + threads - 1) / threads, max_blocks));
    auto* typed = static_cast<typename Format::Stored*>(data);
    auto typed_divisor = static_cast<Compute>(divisor);
    void* arguments[] = {&typed, &count, &typed_divisor};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&divide_kernel<Format, Compute>), dim3(blocks),
                            dim3(threads), arguments, 0, static_cast<cudaStream_t>(stream));
}

}  // namespace

void load_divide_kernels() {
    cudaFuncAttributes attributes;
    for (const void* kernel : {reinterpret_cast<const void*>(&divide_kernel<F16, float>),
                               reinterpret_cast<const void*>(&divide_kernel<BF16, float>),
                               reinterpret_cast<const void*>(&divide_kernel<F32, float>),
                               reinterpret_cast<const void*>(&divide_kernel<F64, double>)})
        check(cudaFuncGetAttributes(&attributes, kernel), "loading the AVG division kernels");
}

void divide_on_device(void* data, int64_t count, ddp_dtype dtype, double divisor, void* stream) {
    if (count == 0) return;
    cudaError_t error = cudaSuccess;
    switch (dtype) {
    case DDP_DTYPE_F16: error = launch<F16, float>(data, count, divisor, stream); break;
    case DDP_DTYPE_BF16: error = launch<BF16, float>(data, count, divisor, stream); break;
    case DDP_DTYPE_F32: error = launch<F32, float>(data, count, divisor, stream); break;
    case DDP_DTYPE_F64: error = launch<F64, double>(data, count, divisor, stream); break;
    default: fail(DDP_ERR_INTERNAL, "divide_on_device called with an integer dtype");
    }
    check(error, "launching the AVG division kernel");
}

}  // namespace ddp::cuda
