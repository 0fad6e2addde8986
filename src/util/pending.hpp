// An operation in progress that its caller drives to completion, so that
// one deadline can cover every step of a collective whatever moves it (a
// transport's message, a data plane's transfer, a copy on a GPU stream).
#pragma once

#include <chrono>
#include <cstdint>

namespace ddp {

using Clock = std::chrono::steady_clock;

/// An operation a transport or plane has started. test() advances it and
/// returns true once it has finished; it throws ddp::Error when the
/// operation reports one. Until then the buffers it was started on belong
/// to it.
class Pending {
public:
    virtual ~Pending() = default;
    virtual bool test() = 0;
    /// Sleeps until test() may get further (a peer moved) or until `until`,
    /// and says true; false, at once, where the operation cannot tell (an
    /// MPI request progresses only while tested): its waiter paces itself.
    virtual bool sleep(Clock::time_point until) {
        (void)until;
        return false;
    }
    /// A count that grows whenever the operation (or one its plane drives
    /// before it) finishes a step its peers took part in; 0 where it cannot
    /// tell. A waiter that sees it grow spins on instead of sleeping: peers
    /// that keep up are running, and a sleep would cost a wake at every step.
    virtual uint64_t progress() const { return 0; }
};

}  // namespace ddp
