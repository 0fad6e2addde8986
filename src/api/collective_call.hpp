// A collective entry point's arguments, checked into the complete call
// that core runs. An invalid call is still announced to the peers (core's
// reject_invalid_call), so that they fail at once instead of waiting.
#pragma once

#include <cstdint>
#include <span>

#include "control/collective_kind.hpp"
#include "core/collectives.hpp"
#include "core/communicator.hpp"
#include "core/dispatch.hpp"
#include "ddp/ddp.h"
#include "util/error.hpp"

namespace ddp {

/// A collective's per-call options, checked, with the fusion size resolved.
struct CallOptions {
    int64_t fusion_bytes;  ///< 0: chosen by measurement (Settings::autotune_buckets)
    double timeout_s;
    void* cuda_stream;
    const char* const* names;
    bool for_binding;
};

CallOptions checked_call_options(const ddp_collective_options* opts, const Communicator& comm);

/// Fills in what every call of `kind` takes from its options and checks
/// where its tensors are (host or the rank's GPU).
void complete_call(CollectiveCall& call, CollectiveKind kind, const CallOptions& options, const Communicator& comm);

/// The validated call of `kind`: `entry_arguments(comm, options)` checks
/// the entry point's own arguments into a call. On an invalid argument the
/// peers are told, and the error thrown naming this rank.
template <typename EntryArguments>
CollectiveCall valid_call(Communicator& comm, CollectiveKind kind, const ddp_collective_options* opts,
                          EntryArguments entry_arguments) {
    double timeout_s = 0;  // as far as it could be read, for announcing an invalid call
    try {
        const CallOptions options = checked_call_options(opts, comm);
        timeout_s = options.timeout_s;
        CollectiveCall call = entry_arguments(comm, options);
        complete_call(call, kind, options, comm);
        return call;
    } catch (const Error& invalid) {
        reject_invalid_call(comm, kind, timeout_s, invalid);
    }
}

/// A writable tensor list: valid tensors that do not overlap.
std::span<const ddp_tensor> checked_writable_list(const ddp_tensor* tensors, int64_t n, const char* what);

}  // namespace ddp
