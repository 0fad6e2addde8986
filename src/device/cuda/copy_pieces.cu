// Many small copies in one launch: the packing and unpacking of small
// device tensors into a bucket (planes/nccl/device_fusion.cpp), which with a
// cudaMemcpyAsync per tensor would cost a launch per tensor (ResNet-50: 300).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "device/cuda/cuda.hpp"
#include "device/cuda/cuda_check.hpp"

namespace ddp::cuda {

namespace {

constexpr int pieces_per_launch = 64;  // 64 pieces: 1.5 KiB of kernel arguments (the limit is 4 KiB)

struct PieceBatch {
    const unsigned char* from[pieces_per_launch];
    unsigned char* to[pieces_per_launch];
    size_t bytes[pieces_per_launch];
};

// Block row y copies piece y: 16 bytes a thread while both ends are 16-byte
// aligned (a cudaMalloc'd buffer, a bucket), then the tail byte by byte.
__global__ void copy_kernel(PieceBatch batch) {
    const int piece = static_cast<int>(blockIdx.y);
    const unsigned char* from = batch.from[piece];
    unsigned char* to = batch.to[piece];
    const size_t bytes = batch.bytes[piece];
    const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    size_t vectored = 0;
    if (((reinterpret_cast<uintptr_t>(from) | reinterpret_cast<uintptr_t>(to)) & 15) == 0) {
        vectored = bytes / 16 * 16;
        const auto* from16 = reinterpret_cast<const uint4*>(from);
        auto* to16 = reinterpret_cast<uint4*>(to);
        for (size_t i = first; i < bytes / 16; i += stride) to16[i] = from16[i];
    }
    for (size_t i = vectored + first; i < bytes; i += stride) to[i] = from[i];
}

}  // namespace

void load_copy_kernel() {
    cudaFuncAttributes attributes;
    check(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&copy_kernel)),
          "loading the bucket copy kernel");
}

void copy_pieces(std::span<const CopyPiece> pieces, void* stream) {
    constexpr unsigned threads = 256;
    for (size_t start = 0; start < pieces.size(); start += pieces_per_launch) {
        const size_t n = std::min<size_t>(pieces_per_launch, pieces.size() - start);
        PieceBatch batch{};
        size_t largest = 0;
        for (size_t i = 0; i < n; ++i) {
            const CopyPiece& piece = pieces[start + i];
            batch.from[i] = static_cast<const unsigned char*>(piece.from);
            batch.to[i] = static_cast<unsigned char*>(piece.to);
            batch.bytes[i] = piece.bytes;
            largest = std::max(largest, piece.bytes);
        }
        // Enough blocks for the largest piece at 16 bytes a thread, at most 32 a piece (grid-stride beyond).
        const auto blocks = static_cast<unsigned>(std::clamp<size_t>((largest / 16 + threads - 1) / threads, 1, 32));
        void* arguments[] = {&batch};
        check(cudaLaunchKernel(reinterpret_cast<const void*>(&copy_kernel), dim3(blocks, static_cast<unsigned>(n)),
                               dim3(threads), arguments, 0, static_cast<cudaStream_t>(stream)),
              "launching the bucket copy kernel");
    }
}

}  // namespace ddp::cuda
