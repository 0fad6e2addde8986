// Small device tensors reduced as one: an allreduce packs the tensors under
// 1 MiB into a bucket per dtype (one kernel per 64 tensors), reduces each
// bucket with one NCCL call beside the large tensors' own, and unpacks.
// NCCL costs about as much per call in a group as per tensor copied, so a
// list of many small tensors (ResNet-50's batch norms, biases) costs what
// its large tensors do. What goes in a bucket follows from the agreed
// counts and dtypes alone, so every rank makes the same NCCL calls.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "ddp/ddp.h"
#include "device/cuda/cuda.hpp"

namespace ddp {

class DeviceFusion {
public:
    /// What to reduce in place for a device list: each tensor of 1 MiB or
    /// more as it is, then a bucket per dtype that has two or more smaller
    /// ones (its single small tensor, as it is), packed now on `stream`.
    std::vector<ddp_tensor> pack(std::span<const ddp_tensor> tensors, void* stream);
    /// Copies the buckets back into the small tensors on `stream`, after
    /// the reduction; the buffer is free for the next pack once that is done.
    void unpack(void* stream);

private:
    /// A small tensor and its place in the bucket.
    struct Member {
        void* tensor;
        void* in_bucket;
        size_t bytes;
    };
    /// One copy per member, into the bucket or back.
    std::vector<cuda::CopyPiece> copies(bool into_bucket) const;

    cuda::KeptBuffer buffer_{cuda::KeptBuffer::Kind::device};
    std::vector<Member> packed_;           ///< the last pack's members
    std::optional<cuda::Event> unpacked_;  ///< recorded after the last unpack
};

}  // namespace ddp
