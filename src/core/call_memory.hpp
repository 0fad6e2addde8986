// What a communicator's calls reuse from one call to the next: the fusion
// buffer (tensors packed into buckets), pinned host memory for staging
// device buffers, and a CUDA stream of libddp's own. Used by one call at a
// time (the communicator admits one), so nothing here locks.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "device/cuda/cuda.hpp"

namespace ddp {

class CallMemory {
public:
    /// A scratch buffer of at least `bytes`, kept between calls.
    std::span<std::byte> fusion_buffer(size_t bytes);
    /// Pinned host memory of at least `bytes` for staging device buffers.
    std::span<std::byte> staging_buffer(size_t bytes) { return staging_.get(bytes); }
    /// A CUDA stream of libddp's own on the current GPU (created on first
    /// use): staged async requests run on it, and NCCL calls given the
    /// per-thread default stream (which NCCL's own threads would take for
    /// theirs).
    void* own_stream();

private:
    std::vector<std::byte> fusion_;
    cuda::KeptBuffer staging_{cuda::KeptBuffer::Kind::pinned_host};
    std::unique_ptr<cuda::Stream> own_stream_;
};

}  // namespace ddp
