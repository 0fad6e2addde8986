// Whether this rank's waits for data give their core away: the contended
// mode a user sees at DDP_LOG_LEVEL=debug. A wait spins for its first
// microseconds and then sleeps between tests (ControlPlane::wait); a rank
// whose waits keep reaching the sleep has peers that are late or off their
// cores (other work shares them), and says so once when that starts and
// once when it ends, not per wait.
#pragma once

#include <mutex>

namespace ddp {

class ContentionWatch {
public:
    enum class Change { none, started, ended };
    /// A wait for data ended; `slept`: it went past its spin and slept.
    Change wait_ended(bool slept);
    /// Waits that slept since contention started (for the line that ends it).
    int slept_while_contended();

    /// Waits in a row that end while spinning before the mode ends: one
    /// quick wait among sleeping ones is not the end of contention.
    static constexpr int quiet_waits_to_end = 100;

private:
    std::mutex mutex_;  // the caller's thread and the async worker both wait
    bool contended_ = false;
    int quiet_in_a_row_ = 0;
    int slept_while_contended_ = 0;
};

}  // namespace ddp
