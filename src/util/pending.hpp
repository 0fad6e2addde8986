// An operation in progress that its caller drives to completion, so that
// one deadline can cover every step of a collective whatever moves it (a
// transport's message, a data plane's transfer, a copy on a GPU stream).
#pragma once

#include <chrono>

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
};

}  // namespace ddp
