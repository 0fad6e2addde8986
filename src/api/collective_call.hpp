// A collective entry point's arguments, checked into the complete call
// that core runs: each exported collective fills one EntryArguments and the
// checks follow what its kind's rules say it takes (NCCL's ncclInfo and
// ArgsCheck). An invalid call is still announced to the peers (core's
// reject_invalid_call), so that they fail at once instead of waiting.
#pragma once

#include <cstdint>
#include <span>

#include "util/collective_kind.hpp"
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

/// What an exported collective was given, unchecked; what its kind does
/// not take stays as it is.
struct EntryArguments {
    const ddp_tensor* tensors = nullptr;
    int64_t n = 0;
    const ddp_tensor* outputs = nullptr;
    int op = DDP_OP_SUM;
    int32_t root = 0;
    double* scalars = nullptr;
    int64_t n_scalars = 0;
};

/// `arguments` checked into a call of `kind` as its rules' Takes say, with
/// the options' fusion size where the kind moves data in a plan.
CollectiveCall checked_call(const Communicator& comm, CollectiveKind kind, const EntryArguments& arguments,
                            const CallOptions& options);

/// Fills in what every call takes from its options and checks where its
/// tensors are (host or the rank's GPU); `list_name` names its list in messages.
void complete_call(CollectiveCall& call, CollectiveKind kind, const CallOptions& options, const Communicator& comm,
                   const char* list_name);

/// The validated call of `kind` whose list messages call `list_name`:
/// `entry(comm, options)` checks the entry point's arguments into a call.
/// On an invalid argument the peers are told, and the error thrown naming
/// this rank.
template <typename Entry>
CollectiveCall valid_call(Communicator& comm, CollectiveKind kind, const char* list_name,
                          const ddp_collective_options* opts, Entry entry) {
    double timeout_s = 0;  // as far as it could be read, for announcing an invalid call
    try {
        const CallOptions options = checked_call_options(opts, comm);
        timeout_s = options.timeout_s;
        CollectiveCall call = entry(comm, options);
        complete_call(call, kind, options, comm, list_name);
        return call;
    } catch (const Error& invalid) {
        reject_invalid_call(comm, kind, timeout_s, invalid);
    }
}

}  // namespace ddp
