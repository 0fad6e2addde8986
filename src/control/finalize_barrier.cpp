#include "control/finalize_barrier.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace ddp {

bool all_reach_finalize(ControlChannel& channel, ControlPlane& control, double timeout_s) {
    // How long a silent peer may take to answer before it counts as gone.
    constexpr double answer_wait_s = 2;
    // After a timeout, peers that still answer get at least this long to
    // notice (at their next call) and reach finalize themselves.
    constexpr double broken_peer_wait_s = 30;
    std::unique_ptr<Pending> barrier = channel.start_finalize_barrier();
    if (!barrier) return true;
    // After a timeout, a peer that no longer answers is dead or hung: waiting
    // for it would only delay this process's exit. Without a background
    // responder, silence proves nothing, so only the timeout ends the wait.
    const bool silence_means_gone = control.broken() && channel.answers_in_background();
    const double wait_s = silence_means_gone ? std::max(timeout_s, broken_peer_wait_s) : timeout_s;
    const auto give_up_at = deadline_after(wait_s);
    // The hang watchdog holds this wait to its end (a last question may start just before).
    const auto watched = control.watch_finalize(deadline_after(wait_s + answer_wait_s));
    for (auto next_question = Clock::now() + std::chrono::milliseconds(500);;) {
        channel.poll_control();
        if (barrier->test()) return true;
        const auto now = Clock::now();
        if (now > give_up_at) break;
        if (silence_means_gone && now > next_question) {
            const auto answers = channel.ask_peers(deadline_after(answer_wait_s), 0);
            for (size_t peer = 0; peer < answers.size(); ++peer)
                if (static_cast<int>(peer) != channel.rank() && !answers[peer] && !barrier->test()) {
                    channel.abandon(std::move(barrier));
                    return false;
                }
            next_question = Clock::now() + std::chrono::milliseconds(500);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    channel.abandon(std::move(barrier));
    return false;
}

}  // namespace ddp
