// How a validated call takes its place in the communicator's call order
// on the caller's thread, and how a call that failed validation on this
// rank still takes its place, so that its peers fail at once instead of
// waiting. (Async calls: core/async_dispatch.)
#pragma once

#include <string_view>

#include "util/collective_kind.hpp"
#include "core/collectives.hpp"
#include "core/communicator.hpp"
#include "util/error.hpp"

namespace ddp {

/// Runs the validated `call` on the caller's thread, after the async
/// requests started before it. Throws ddp::Error.
void run_blocking(Communicator& comm, const CollectiveCall& call);

/// For this rank's invalid call of `kind`: takes part in agreement, so that
/// its peers return DDP_ERR_MISMATCH at once, then throws `invalid`, naming
/// this rank. Must run in call order (inside comm.run()).
[[noreturn]] void report_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, const Error& invalid);

/// report_invalid_call in call order: after the requests started before.
[[noreturn]] void reject_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, const Error& invalid);

/// For a call a binding found invalid before reaching libddp (ddp_report_invalid_call):
/// takes part in agreement in call order, naming `reason`; a broken
/// communicator is no error here (the binding reports its own).
void announce_binding_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, std::string_view reason);

}  // namespace ddp
