#include "core/dispatch.hpp"

#include <string>

#include "core/group_calls.hpp"

namespace ddp {

namespace {

/// An invalid call's error as this rank reports it: naming the rank.
Error naming_this_rank(const Communicator& comm, const Error& invalid) {
    return Error(invalid.status(), "rank " + std::to_string(comm.channel().rank()) + ": " + invalid.what());
}

}  // namespace

void run_blocking(Communicator& comm, const CollectiveCall& call) {
    comm.run([&] { run_collective(comm, call); });
}

void report_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, const Error& invalid) {
    try {
        announce_invalid_call(comm, kind, timeout_s, invalid.what());
    } catch (const Error&) {
        // A broken communicator: the validation error is still the one to report.
    }
    throw naming_this_rank(comm, invalid);
}

void reject_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, const Error& invalid) {
    if (in_group()) {
        // The peers' calls of the group are not started yet when this thread
        // drives them all: they learn of it in the background, as they run.
        group_add(Request{comm.submit([&comm, kind, timeout_s, invalid] {
            report_invalid_call(comm, kind, timeout_s, invalid);
        })});
        throw naming_this_rank(comm, invalid);
    }
    comm.run([&] { report_invalid_call(comm, kind, timeout_s, invalid); });
    throw invalid;  // not reached: report_invalid_call throws
}

void announce_binding_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s,
                                   std::string_view reason) {
    auto announce = [&comm, kind, timeout_s, reason = std::string(reason)] {
        try {
            announce_invalid_call(comm, kind, timeout_s, reason);
        } catch (const Error&) {
            // A broken communicator: the binding's own error is still the one to report.
        }
    };
    // Inside a group the peers' calls start only as the group runs, as for reject_invalid_call.
    if (in_group()) return group_add(Request{comm.submit(announce)});
    comm.run(announce);
}

}  // namespace ddp
