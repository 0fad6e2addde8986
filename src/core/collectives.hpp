// The tensor-list collectives, run the same way whatever the collective
// (its own part is in core/collectives/<kind>.cpp) and whatever the planes:
// the control plane numbers the call and holds it to its deadline,
// agreement checks that every rank makes the same call, the fusion plan
// decides how the list travels, and every plane operation is waited for
// under the same deadline. Arguments arrive validated (src/api does that).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "util/collective_kind.hpp"
#include "core/communicator.hpp"
#include "core/request.hpp"

namespace ddp {

/// One collective as every rank describes it (after validation).
struct CollectiveCall {
    CollectiveKind kind = CollectiveKind::barrier;
    /// The tensors the call reads (and, for every kind but allgather and
    /// reduce_scatter, writes in place).
    std::span<const ddp_tensor> tensors;
    /// allgather's and reduce_scatter's results, one per tensor; else empty.
    std::span<const ddp_tensor> outputs;
    ddp_op op = DDP_OP_SUM;
    int32_t root = 0;
    int64_t fusion_bytes = 0;   ///< resolved: -1 turns fusion off, 0: chosen by measurement
    std::span<double> scalars;  ///< sync_optimizer_state's
    double timeout_s = 0;       ///< this call's own; 0: the communicator's
    bool for_binding = false;   ///< a binding's own call (ddp_collective_options.for_binding)
    /// check_replicas' results: whether all ranks hold the same bytes, and
    /// if not, a sentence naming the tensor and two ranks.
    bool* identical = nullptr;
    std::string* difference = nullptr;
    /// Whether the tensors are in device memory (all of them; validated).
    bool on_device = false;
    /// The cudaStream_t device work is ordered on (ddp_collective_options).
    void* stream = nullptr;
    /// Set for an async call that runs on the GPU (see runs_on_gpu): the
    /// watchdog completes it, and its event marks the work's end.
    std::shared_ptr<Request> gpu_request;
    /// The tensors' names for the timeline (ddp_collective_options.names):
    /// empty, or one per tensor, any of them NULL.
    std::span<const char* const> names;
};

/// Runs `call` on this rank. Throws ddp::Error (mismatch, timeout, backend).
/// On the GPU (runs_on_gpu) it returns once the work is enqueued.
void run_collective(Communicator& comm, const CollectiveCall& call);

/// What follows agreement: the data phase of a host call (device calls
/// staged through host memory end here too). `one_region`: the call's
/// tensors lie in one region of memory on every rank (then an in-place
/// collective moves them in one step).
void run_host_data_phase(Communicator& comm, CallContext& context, const CollectiveCall& call,
                         std::span<const uint64_t> words, bool one_region);

/// sync_optimizer_state's scalars (host doubles) from root to every rank,
/// over the host channel, whatever carries the leaves.
void broadcast_scalars(Communicator& comm, CallContext& context, const CollectiveCall& call);

/// Takes part in agreement for a call of `kind` whose arguments failed
/// validation on this rank, so that its peers fail at once instead of waiting,
/// naming this rank and `reason`.
void announce_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, std::string_view reason);

}  // namespace ddp
