#include "control/control_plane.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

using std::chrono::duration;
using std::chrono::duration_cast;

// A data transfer that progresses only while tested (MPI) keeps testing this
// long. 2,500 x 256 floats through MPI_Iallreduce right after per-tensor
// MPI_Allreduce calls, beside one busy loop (2 ranks, medians of 20): 1.9 ms
// sleeping between tests after 200 us, 0.35 ms after 1-2 ms, 0.37 ms never
// sleeping, 4-5.7 ms yielding; MPI_Allreduce 0.24 ms.
constexpr auto progress_spin = std::chrono::milliseconds(2);
// How often a wait looks for abort notices and the stall threshold.
constexpr auto control_interval = std::chrono::milliseconds(1);
// The longest a timeout or stall report waits for peers to say what they do.
constexpr double answer_wait_s = 1.0;
// A wait this long looks for dead peers on this host, and as often.
constexpr auto liveness_interval = std::chrono::milliseconds(100);
// How long a transport's failure waits for a dead peer to explain it: a
// peer that finds one on its host tells within a liveness interval or two
// (multinode_kill_shm_2x2: 100 ms after this rank's failed MPI_Isend).
constexpr auto explain_wait = std::chrono::milliseconds(500);

/// "allreduce #7, still inside it", "barrier #4, finished", "no collective yet".
std::string status_text(const PeerStatus& status) {
    if (status.sequence == 0) return "no collective yet";
    return call_name(status.kind, CallLabel::from_word(status.label)) +
           (status.in_call ? ", still inside it" : ", finished");
}

}  // namespace

Clock::time_point deadline_after(double seconds) {
    const auto now = Clock::now();
    const double room = duration<double>(Clock::time_point::max() - now).count();
    if (!(seconds < room)) return Clock::time_point::max();
    return now + duration_cast<Clock::duration>(duration<double>(seconds));
}

ControlPlane::ControlPlane(ControlChannel& channel, double timeout_s, double stall_warning_s, double hang_grace_s,
                           trace::CallTrace* trace, std::string name, double peer_dead_s)
    : channel_(channel),
      name_(std::move(name)),
      prefix_(name_.empty() ? std::string() : name_ + ": "),
      own_trace_(trace != nullptr ? nullptr
                                  : std::make_unique<trace::CallTrace>(trace::default_flight_recorder_size, std::string(),
                                                                       channel.rank(), channel.size(), channel.name(),
                                                                       name_)),
      trace_(trace != nullptr ? *trace : *own_trace_),
      timeout_s_(timeout_s),
      stall_warning_s_(stall_warning_s),
      watched_(channel.rank(), hang_grace_s),
      liveness_(channel, peer_dead_s) {
    const CpuShare share = cpu_share(channel);
    if (share.outnumbered()) spin_ = outnumbered_spin;
    if (share.outnumbered() && trace != nullptr)  // a communicator's, not a set-up exchange's
        log_line(channel.rank(), channel.size(), DDP_LOG_DEBUG,
                 prefix_ + share.describe() + ": waits spin " + std::to_string(outnumbered_spin.count()) +
                     " us before they sleep, not " + std::to_string(hot_spin.count()) +
                     " us, to hand the core to the peer they wait for");
}

CallContext ControlPlane::begin(CollectiveKind kind, double call_timeout_s, bool for_binding) {
    require_usable();
    const uint64_t sequence = sequence_.fetch_add(1, std::memory_order_relaxed) + 1;
    const CallLabel label{for_binding ? user_calls_.load(std::memory_order_relaxed)
                                      : user_calls_.fetch_add(1, std::memory_order_relaxed) + 1,
                          for_binding};
    const uint64_t previous_kind = kind_.exchange(static_cast<uint64_t>(kind), std::memory_order_relaxed);
    const uint64_t previous_label = label_.exchange(label.word(), std::memory_order_relaxed);
    in_call_.store(true, std::memory_order_release);
    trace_.recorder.entered(sequence, static_cast<uint64_t>(kind), label.word());
    const double timeout = call_timeout_s > 0 ? call_timeout_s : timeout_s_;
    CallContext call{.kind = kind,
                     .sequence = sequence,
                     .started = Clock::now(),
                     .deadline = deadline_after(timeout),
                     .stall_warning_at = deadline_after(stall_warning_s_),
                     .label = label,
                     .previous_kind = previous_kind,
                     .previous_label = CallLabel::from_word(previous_label)};
    // A reducer step spans the caller's computing between its marks: only
    // its waits are watched.
    watching_call_ = kind != CollectiveKind::reducer_step;
    if (watching_call_) watched_.enter(static_cast<uint64_t>(kind), label.word(), call.started, call.deadline);
    return call;
}

void ControlPlane::end(bool failed) {
    trace_.recorder.ended(sequence_.load(std::memory_order_relaxed), failed);
    if (watching_call_) watched_.leave();
    watching_call_ = false;
    in_call_.store(false, std::memory_order_release);
}

void ControlPlane::record_mismatch(const CallContext& call) {
    // No dump: the error's message says which rank passed what.
    trace_.recorder.mark(call.sequence, trace::CallState::mismatch);
}

PeerStatus ControlPlane::status() const {
    return PeerStatus{sequence_.load(std::memory_order_relaxed), kind_.load(std::memory_order_relaxed),
                      in_call_.load(std::memory_order_acquire), label_.load(std::memory_order_relaxed)};
}

void ControlPlane::require_usable(bool may_poll) {
    if (may_poll && !channel_.answers_in_background()) channel_.poll_control();
    if (broken()) fail_broken("", nullptr);
    if (auto failure = failure_from_notice(sequence_.load(std::memory_order_relaxed) + 1))
        fail_broken(*failure, nullptr);
}

std::optional<std::string> ControlPlane::failure_from_notice(uint64_t sequence) {
    const std::optional<AbortNotice> notice = channel_.abort_notice();
    if (!notice) return std::nullopt;
    const std::string peer = "rank " + std::to_string(notice->from_rank);
    const std::string mine = "rank " + std::to_string(channel_.rank());
    const std::string its_call = notice->sequence == 0 ? std::string("its first collective")
                                                       : call_name(notice->kind, CallLabel::from_word(notice->label));
    switch (notice->reason) {
    case AbortNotice::Reason::finalizing:
        if (sequence <= notice->sequence) return std::nullopt;  // the peer took part in this one
        return peer + " finalized the communicator after " + its_call + ", so " + mine +
               "'s collectives after it can never complete; the communicator is unusable";
    case AbortNotice::Reason::aborted:
        return peer + " aborted the communicator (ddp_comm_abort, after " + its_call + ") and told " + mine +
               "; the communicator is unusable: finalize it and end the job";
    case AbortNotice::Reason::device_failed:
        return peer + "'s GPU work failed or timed out (after " + its_call + "), and it told " + mine +
               "; the communicator is unusable: finalize it and end the job";
    case AbortNotice::Reason::gave_up:
        if (sequence < notice->sequence) return std::nullopt;  // an earlier call every rank joined
        return peer + " gave up on " + its_call + " after its timeout and told " + mine +
               "; the communicator is unusable: finalize it and end the job";
    case AbortNotice::Reason::peer_died:
        if (sequence < notice->sequence) return std::nullopt;
        return peer + " found " + liveness_.who(notice->dead_rank) + " dead during " + its_call + " and told " +
               mine + "; the communicator is unusable: finalize it and end the job";
    }
    return peer + " sent an unknown notice; the communicator is unusable";
}

void ControlPlane::fail_broken(const std::string& message, std::unique_ptr<Pending> pending) {
    if (pending) channel_.abandon(std::move(pending));
    if (!message.empty()) mark_broken(message);
    std::lock_guard lock(broken_mutex_);
    fail(broken_status_, broken_message_);
}

void ControlPlane::wait(CallContext& call, std::unique_ptr<Pending> pending, WaitStyle style) {
    if (!pending) return;
    // Past the deadline plus the grace, a thread still in here is stuck (the
    // async worker's waits, and a reducer step's, are watched only here).
    const WatchedWaits::Scope watched(watched_, static_cast<uint64_t>(call.kind), call.label.word(), call.started,
                                      call.deadline);
    // Broken already (a timeout of an earlier bucket, ddp_comm_abort): no new wait.
    if (broken()) fail_broken("", std::move(pending));
    const trace::Span span(trace_.timeline, "wait", trace::Row::work, call.sequence);
    const auto start = Clock::now();
    // A wait spins for spin_ from the operation's last step, not from its
    // start: a long operation whose peers keep up never sleeps. Once it has
    // slept (peers late or off their cores), a step no longer buys a new
    // spin: spinning would hold the core such a peer needs.
    auto spin_from = start;
    uint64_t progress = pending->progress();
    auto next_control = start + control_interval;
    auto next_liveness = start + liveness_interval;
    int64_t asleep_from_ns = 0;  // when this wait first slept (0: it has not)
    auto slept = [&](Clock::time_point since) {
        if (asleep_from_ns == 0)
            asleep_from_ns = duration_cast<std::chrono::nanoseconds>(since.time_since_epoch()).count();
    };
    for (;;) {
        if (test_or_abandon(call, pending, start)) {
            wait_ended(call, style, asleep_from_ns);
            return fail_if_a_peer_gave_up(call);
        }
        const auto now = Clock::now();
        if (now >= next_control) {
            channel_.poll_control();
            if (broken()) fail_broken("", std::move(pending));  // aborted from another thread
            if (auto failure = failure_from_notice(call.sequence)) fail_broken(*failure, std::move(pending));
            if (!call.stall_reported && now >= call.stall_warning_at) report_stall(call);
            next_control = Clock::now() + control_interval;
        }
        if (now >= next_liveness) {
            if (auto dead = liveness_.dead_peer(now, start)) peer_died(call, std::move(pending), *dead);
            next_liveness = now + liveness_interval;
        }
        if (now > call.deadline) give_up(call, std::move(pending));
        if (const uint64_t moved = pending->progress(); moved != progress) {
            progress = moved;
            if (asleep_from_ns == 0) spin_from = now;
        }
        if (now - spin_from < spin_) continue;
        // A peer off its core gets the core back sooner from a rank asleep.
        if (test_or_abandon(call, pending, start, std::min({next_control, next_liveness, call.deadline}))) {
            slept(now);
            continue;
        }
        // An operation that cannot sleep (MPI) keeps its measured pacing.
        if (now - start < hot_spin) continue;
        switch (style) {
        case WaitStyle::for_data:
            if (now - start < progress_spin) continue;
            std::this_thread::sleep_for(std::chrono::microseconds(1));
            break;
        case WaitStyle::for_peers: std::this_thread::sleep_for(std::chrono::microseconds(50)); break;
        }
        slept(now);
    }
}

void ControlPlane::wait_ended(const CallContext& call, WaitStyle style, int64_t asleep_from_ns) {
    if (asleep_from_ns != 0 && trace_.timeline.on())
        trace_.timeline.record(trace::ended_now("asleep", trace::thread_row(trace::Row::work), asleep_from_ns, call.sequence));
    if (style != WaitStyle::for_data) return;  // peers late to agree are not contention
    switch (contention_.wait_ended(asleep_from_ns != 0)) {
    case ContentionWatch::Change::none: return;
    case ContentionWatch::Change::started:
        return log_line(channel_.rank(), channel_.size(), DDP_LOG_DEBUG,
                        prefix_ + "contended: a wait for data in " + call_name(static_cast<uint64_t>(call.kind), call.label) +
                            " outlasted its spin, so waits now sleep between tests and give this core away "
                            "(peers late or off their cores: other work shares them)");
    case ContentionWatch::Change::ended:
        return log_line(channel_.rank(), channel_.size(), DDP_LOG_DEBUG,
                        prefix_ + "no longer contended: " + std::to_string(ContentionWatch::quiet_waits_to_end) +
                            " waits for data in a row ended while spinning (" +
                            std::to_string(contention_.slept_while_contended()) + " slept before them)");
    }
}

bool ControlPlane::test_or_abandon(CallContext& call, std::unique_ptr<Pending>& pending,
                                   Clock::time_point wait_started, std::optional<Clock::time_point> sleep_until) {
    try {
        return sleep_until ? pending->sleep(*sleep_until) : pending->test();
    } catch (const Error& error) {
        // MPI may still hold the operation's buffers: they must outlive it.
        channel_.abandon(std::move(pending));
        if (error.status() == DDP_ERR_BACKEND) explain_transport_failure(call, wait_started);
        throw;
    }
}

void ControlPlane::explain_transport_failure(CallContext& call, Clock::time_point wait_started) {
    if (broken()) return;
    const auto until = Clock::now() + explain_wait;
    auto next_liveness = Clock::now();
    while (Clock::now() < until) {
        try {
            channel_.poll_control();
        } catch (const Error&) {
            return;  // the control channel failed too: the transport's own error stands
        }
        if (auto failure = failure_from_notice(call.sequence)) fail_broken(*failure, nullptr);
        if (const auto now = Clock::now(); now >= next_liveness) {
            if (auto dead = liveness_.dead_peer(now, wait_started)) peer_died(call, nullptr, *dead);
            next_liveness = now + liveness_interval / 4;
        }
        std::this_thread::sleep_for(control_interval);
    }
}

void ControlPlane::fail_if_a_peer_gave_up(const CallContext& call) {
    channel_.poll_control();
    const std::optional<AbortNotice> notice = channel_.abort_notice();
    const bool stopped = notice && (notice->reason == AbortNotice::Reason::gave_up ||
                                    notice->reason == AbortNotice::Reason::peer_died);
    if (stopped && notice->sequence == call.sequence)
        fail_broken(*failure_from_notice(call.sequence), nullptr);
}

void ControlPlane::abort(const std::string& reason) {
    const PeerStatus mine = status();
    mark_broken("rank " + std::to_string(channel_.rank()) + " aborted the communicator (" + reason +
                "); it is unusable: finalize it and end the job");
    tell_peers(AbortNotice{channel_.rank(), mine.sequence, mine.kind, AbortNotice::Reason::aborted, -1, mine.label});
}

void ControlPlane::break_from_device(ddp_status failure, const std::string& message, bool on_caller_thread) {
    const PeerStatus mine = status();
    mark_broken("rank " + std::to_string(channel_.rank()) + ": " + message +
                    "; the communicator is unusable: finalize it and end the job",
                failure);
    if (on_caller_thread || channel_.allows_concurrent_calls())
        tell_peers(
            AbortNotice{channel_.rank(), mine.sequence, mine.kind, AbortNotice::Reason::device_failed, -1, mine.label});
}

void ControlPlane::tell_peers(const AbortNotice& notice) {
    channel_.send_abort(notice);
    if (notice.reason != AbortNotice::Reason::finalizing && stop_device_work_) stop_device_work_();
}

void ControlPlane::announce_finalize() {
    const PeerStatus mine = status();
    channel_.send_abort(
        AbortNotice{channel_.rank(), mine.sequence, mine.kind, AbortNotice::Reason::finalizing, -1, mine.label});
}

double ControlPlane::stop_call(CallContext& call, std::unique_ptr<Pending> pending, AbortNotice::Reason reason,
                               int dead_rank) {
    if (pending) channel_.abandon(std::move(pending));
    const double waited = duration<double>(Clock::now() - call.started).count();
    // Peers learn first, so that they stop waiting while this rank asks around.
    tell_peers(AbortNotice{channel_.rank(), call.sequence, static_cast<uint64_t>(call.kind), reason, dead_rank,
                           call.label.word()});
    return waited;
}

void ControlPlane::give_up(CallContext& call, std::unique_ptr<Pending> pending) {
    const double waited = stop_call(call, std::move(pending), AbortNotice::Reason::gave_up);
    const std::string missing = who_is_missing(call, deadline_after(std::min(answer_wait_s, waited)));
    break_call(call, call_name(static_cast<uint64_t>(call.kind), call.label) + " timed out on rank " +
                   std::to_string(channel_.rank()) + " after " + seconds_text(waited) + ": " + missing);
}

void ControlPlane::peer_died(CallContext& call, std::unique_ptr<Pending> pending, const DeadPeer& dead) {
    const double waited = stop_call(call, std::move(pending), AbortNotice::Reason::peer_died, dead.rank);
    break_call(call, call_name(static_cast<uint64_t>(call.kind), call.label) + " cannot complete on rank " +
                         std::to_string(channel_.rank()) + " (it waited " + seconds_text(waited) +
                         "): " + dead.sentence + "; " + last_call_of(dead.rank, call));
}

std::string ControlPlane::last_call_of(int rank, const CallContext& call) {
    // Its own word, when it answered a question or heartbeat during the call.
    if (const std::optional<HeardStatus> heard = channel_.last_status(rank); heard && heard->when >= call.started)
        return "its last call: " + status_text(heard->status) + " (it said so " +
               seconds_text(duration<double>(Clock::now() - heard->when).count()) + " before)";
    // Else what agreement proves: every rank entered a call it agreed on.
    const std::string this_call = call_name(static_cast<uint64_t>(call.kind), call.label);
    if (call.joined_by_all) return "its last call: " + this_call + " (every rank had joined it)";
    const std::string before = call.sequence <= 1 ? "none" : call_name(call.previous_kind, call.previous_label);
    return "its last call: " + before + ", or " + this_call + " (which it was not yet known to have joined)";
}

void ControlPlane::break_call(CallContext& call, const std::string& message) {
    trace_.recorder.mark(call.sequence, trace::CallState::timed_out);
    mark_broken(message +
                ". The communicator is now unusable (its peers were told); a buffer of this call may still be "
                "written until the process ends");
    fail_broken("", nullptr);
}

void ControlPlane::report_stall(CallContext& call) {
    call.stall_reported = true;
    const double waited = duration<double>(Clock::now() - call.started).count();
    const double room = duration<double>(call.deadline - Clock::now()).count();
    const std::string missing = who_is_missing(call, deadline_after(std::clamp(room / 2, 0.0, answer_wait_s)));
    log_line(channel_.rank(), channel_.size(), DDP_LOG_WARN,
             prefix_ + call_name(static_cast<uint64_t>(call.kind), call.label) + " has waited " + seconds_text(waited) +
                 " (timeout " + seconds_text(duration<double>(call.deadline - call.started).count()) + "): " +
                 missing);
}

std::string ControlPlane::who_is_missing(const CallContext& call, Clock::time_point answer_deadline) {
    const auto asked = Clock::now();
    const auto answers = channel_.ask_peers(answer_deadline, 0);
    const auto now = Clock::now();
    std::string missing, silent;
    for (size_t peer = 0; peer < answers.size(); ++peer) {
        if (static_cast<int>(peer) == channel_.rank()) continue;
        const std::string who = "rank " + std::to_string(peer);
        if (!answers[peer]) {
            // Heard from during this call (a question of its own, a late
            // answer, a notice): alive, only its messages arrive late.
            const auto heard = channel_.last_heard_from(static_cast<int>(peer));
            if (heard && *heard >= call.started)
                missing += (missing.empty() ? "" : "; ") + who + " is slow, not dead: it did not answer within " +
                           seconds_text(duration<double>(now - asked).count()) + ", but a message of its own came " +
                           seconds_text(duration<double>(now - *heard).count()) +
                           " ago (a lossy or congested network, or an overloaded host)";
            else
                silent += (silent.empty() ? "" : ", ") + who;
            continue;
        }
        const PeerStatus& peer_status = *answers[peer];
        if (peer_status.sequence == call.sequence && peer_status.in_call) continue;  // joined
        const std::string last = status_text(peer_status);
        // Out of this very call: done, or failed (on a notice this rank sent
        // as it gave up, or on its own).
        const std::string state = peer_status.sequence > call.sequence    ? " is already past this call (its last: "
                                  : peer_status.sequence == call.sequence ? " has already left this call ("
                                                                          : " has not joined (its last call: ";
        missing += (missing.empty() ? "" : "; ") + who + state + last + ")";
    }
    if (!silent.empty())
        missing += (missing.empty() ? "" : "; ") + silent +
                   " did not answer (dead, hung, or busy outside libddp with no control thread)";
    return missing.empty() ? "every rank has joined; the data transfer itself is slow" : missing;
}

void ControlPlane::mark_broken(const std::string& message, ddp_status status) {
    {
        std::lock_guard lock(broken_mutex_);
        if (broken_.load(std::memory_order_relaxed)) return;  // the first reason stays
        broken_message_ = prefix_ + message;
        broken_status_ = status;
        broken_.store(true, std::memory_order_release);
    }
    // Once per communicator, one line: what broke it and where the flight
    // recorder (what led here) went.
    std::string report;
    try {
        report = "flight recorder: " + trace_.recorder.dump(prefix_ + message);
    } catch (const Error& error) {
        report = "no flight recorder: " + std::string(error.what());
    }
    log_line(channel_.rank(), channel_.size(), DDP_LOG_ERROR, prefix_ + message + " (" + report + ")");
}

}  // namespace ddp
