// Collectives on device buffers, after agreement: the device priority list
// is the communicator's device plane (nccl) where it runs the call with
// libddp's results, then staging through pinned host memory over the host
// planes (mpi; and nccl's float MIN and MAX, whose NaN handling NCCL does
// not promise).
#pragma once

#include <cstdint>
#include <span>

#include "core/collectives.hpp"

namespace ddp {

/// Whether `call` (on device buffers) runs on the GPU: enqueued on its
/// stream, ending when the GPU is done. Otherwise it is staged, and ends
/// when its results are back in the device buffers.
bool runs_on_gpu(Communicator& comm, const CollectiveCall& call);

/// The data phase of a device call, either way. `one_region`: every rank's
/// tensors lie in one region of memory (agreed), so a device plane takes
/// them as one tensor.
void run_device_data_phase(Communicator& comm, CallContext& context, const CollectiveCall& call,
                           std::span<const uint64_t> words, bool one_region);

/// The staged way: device to pinned host memory on the call's stream, the
/// host data phase on that memory, and back. Blocks the host until the
/// results are in the device buffers (MPI needs the bytes on the host).
void run_staged(Communicator& comm, CallContext& context, const CollectiveCall& call,
                std::span<const uint64_t> words);

}  // namespace ddp
