// The transport of a group across processes x threads (ddp_init_local
// under an MPI launcher): rank process x threads + i is thread i of the
// process that MPI numbers `process`. Its control exchanges and its data
// operations are chains (chain.hpp): the process's threads meet in a first
// local group, thread 0 exchanges the process's part with the other
// processes (control over MPI, data as mixed_plane.hpp says), and the threads meet again in a second local group,
// whose rounds keep one order however the first steps end. Abort notices go
// to both local groups and to every other process; a peer's status is read
// off its thread in this process, or is its process's least advanced
// thread's (process_link.hpp).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "control/startup.hpp"
#include "planes/mixed/chain.hpp"
#include "planes/mixed/mixed_plane.hpp"
#include "planes/mixed/process_link.hpp"
#include "planes/mixed/split_plan.hpp"
#include "planes/transport.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

using mixed::Chain;
using Words = std::vector<uint64_t>;
using Lists = std::vector<Words>;

/// Lists as one list of words (their count, each one's length, then each
/// one's words), as a chain hands them from one step to the next.
Words flatten(const Lists& lists) {
    Words words{lists.size()};
    for (const Words& list : lists) words.push_back(list.size());
    for (const Words& list : lists) words.insert(words.end(), list.begin(), list.end());
    return words;
}

Lists unflatten(const Words& words) {
    Lists lists(words.empty() ? 0 : words[0]);
    size_t at = 1 + lists.size();
    for (size_t i = 0; i < lists.size(); ++i) {
        const size_t length = words.at(1 + i);
        lists[i].assign(words.begin() + static_cast<std::ptrdiff_t>(at),
                        words.begin() + static_cast<std::ptrdiff_t>(at + length));
        at += length;
    }
    return lists;
}

/// A local group's own plane (make_local_transports makes that kind).
local::InProcessPlane& in_process_plane(Transport& local_group) {
    return dynamic_cast<local::InProcessPlane&>(*local_group.host_planes().front());
}

class MixedTransport final : public Transport, public ControlChannel {
public:
    /// `first`, `again`: this thread's transports of the two local groups.
    MixedTransport(std::shared_ptr<mixed::ProcessLink> link, int thread, std::unique_ptr<Transport> first,
                   std::unique_ptr<Transport> again)
        : link_(std::move(link)), thread_(thread), first_(std::move(first)), again_(std::move(again)),
          plane_(link_, thread, in_process_plane(*first_), in_process_plane(*again_), gates_) {}
    // Without finalize the control plane whose status this thread gave may
    // be gone already: forgotten without a last look.
    ~MixedTransport() override { link_->forget_status(thread_); }

    const char* name() const override { return "local+mpi"; }
    ControlChannel& channel() override { return *this; }
    std::vector<HostPlane*> host_planes() override { return {&plane_}; }
    bool ranks_are_threads() const override { return true; }

    int rank() const override { return link_->process() * threads() + thread_; }
    int size() const override { return link_->processes() * threads(); }
    int local_rank() const override { return mpi().local_rank() * threads() + thread_; }
    int local_size() const override { return mpi().local_size() * threads(); }
    int ranks_in_this_process() const override { return threads(); }
    int node_leader() const override { return mpi().node_leader() * threads(); }
    bool allows_background_thread() const override { return true; }
    bool allows_concurrent_calls() const override { return true; }

    std::unique_ptr<Pending> start_max_u64(std::span<uint64_t> values) override {
        return start_max_u64_carrying(values, nullptr, 0, DDP_DTYPE_U8, DDP_OP_SUM);
    }
    // Words and the carried data reduced among the threads, across the
    // processes by thread 0, then handed to every thread as thread 0's words.
    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                    ddp_dtype dtype, ddp_op op) override {
        if (link_->processes() == 1) return first().start_max_u64_carrying(values, carried, count, dtype, op);
        struct State {
            Words words;
            std::vector<std::byte> data;
            Lists from_thread_0;
        };
        auto state = std::make_shared<State>();
        state->words.assign(values.begin(), values.end());
        const size_t bytes = carried != nullptr ? static_cast<size_t>(count) * element_size(dtype) : 0;
        if (bytes > 0) state->data.assign(static_cast<std::byte*>(carried), static_cast<std::byte*>(carried) + bytes);
        void* data = bytes > 0 ? state->data.data() : nullptr;
        std::vector<Chain::Step> steps;
        steps.push_back(Chain::step([=, this] {
            return first().start_max_u64_carrying(state->words, data, count, dtype, op);
        }));
        if (leads())
            steps.push_back(Chain::step(gates_.processes, [=, this] {
                return mpi().start_max_u64_carrying(state->words, data, count, dtype, op);
            }));
        steps.push_back(Chain::step(gates_.again, [=, this] {
            Words mine;
            if (leads()) {
                mine = state->words;
                Words packed((state->data.size() + sizeof(uint64_t) - 1) / sizeof(uint64_t));
                if (!state->data.empty()) std::memcpy(packed.data(), state->data.data(), state->data.size());
                mine.insert(mine.end(), packed.begin(), packed.end());
            }
            return again().start_allgather_u64(mine, state->from_thread_0);
        }));
        steps.push_back(Chain::step([=]() -> std::unique_ptr<Pending> {
            const Words& got = state->from_thread_0.at(0);
            std::copy_n(got.begin(), std::min(values.size(), got.size()), values.begin());
            // Ranks that passed different calls carry different bytes; the
            // words say so, and the data means nothing then.
            const size_t sent = (got.size() - std::min(values.size(), got.size())) * sizeof(uint64_t);
            if (bytes > 0) std::memcpy(carried, got.data() + values.size(), std::min(bytes, sent));
            return nullptr;
        }));
        return Chain::start(std::move(steps), {state});
    }
    // The threads' lists, every process's lists by thread 0, then all of
    // them to every thread as thread 0's words.
    std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words, Lists& by_rank) override {
        if (link_->processes() == 1) return first().start_allgather_u64(words, by_rank);
        struct State {
            Lists threads, processes, from_thread_0;
        };
        auto state = std::make_shared<State>();
        Words mine(words.begin(), words.end());
        std::vector<Chain::Step> steps;
        steps.push_back(Chain::step([=, this] { return first().start_allgather_u64(mine, state->threads); }));
        if (leads())
            steps.push_back(Chain::step(gates_.processes, [=, this] {
                return mpi().start_allgather_u64(flatten(state->threads), state->processes);
            }));
        steps.push_back(Chain::step(gates_.again, [=, this] {
            Lists all;
            if (leads())
                for (const Words& process : state->processes)
                    for (Words& list : unflatten(process)) all.push_back(std::move(list));
            return again().start_allgather_u64(leads() ? flatten(all) : Words{}, state->from_thread_0);
        }));
        steps.push_back(Chain::step([=, &by_rank]() -> std::unique_ptr<Pending> {
            by_rank = unflatten(state->from_thread_0.at(0));
            return nullptr;
        }));
        return Chain::start(std::move(steps), {state});
    }
    // Kept by the MPI channel, which then leaves its communicators alone at
    // finalize (an MPI step may still be under way).
    void abandon(std::unique_ptr<Pending> pending) override { mpi().abandon(std::move(pending)); }

    void start_control(const StatusSource& status) override {
        first().start_control(status);
        link_->set_status(thread_, [status] { return status(0); });
    }
    void poll_control() override { mpi().poll_control(); }
    // A peer elsewhere that stopped stops this process's rounds too, before
    // any thread here returns on its notice: a local group withdraws its
    // open rounds (waiting for threads inside their part), so that no thread
    // touches a buffer whose owner has returned.
    std::optional<AbortNotice> abort_notice() override {
        std::optional<AbortNotice> elsewhere = mpi().abort_notice();
        if (elsewhere && elsewhere->reason != AbortNotice::Reason::finalizing)
            link_->relay_once([&] {
                first().send_abort(*elsewhere);
                again().send_abort(*elsewhere);
            });
        return notice_to_keep(first().abort_notice(), elsewhere);
    }
    // Both local groups withdraw their open data rounds; the other
    // processes' threads all hear it.
    void send_abort(const AbortNotice& notice) override {
        first().send_abort(notice);
        again().send_abort(notice);
        mpi().send_abort(notice);
    }
    // Threads here answer for themselves; another process answers for
    // each of its threads in turn (one question per thread number).
    std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point deadline, int) override {
        std::vector<std::optional<PeerStatus>> answers(static_cast<size_t>(size()));
        const auto threads_here = first().ask_peers(deadline, 0);
        // Each question gets its share of the time left: a silent process
        // must not leave the later threads' questions none.
        std::vector<std::vector<std::optional<PeerStatus>>> by_thread;  // [thread][process]
        for (int thread = 0; thread < threads(); ++thread) {
            const auto left = std::max(deadline - Clock::now(), Clock::duration::zero());
            by_thread.push_back(link_->ask_processes(Clock::now() + left / (threads() - thread), thread));
        }
        for (int peer = 0; peer < size(); ++peer) {
            if (peer == rank()) continue;
            const int thread = peer % threads();
            answers[static_cast<size_t>(peer)] =
                here(peer) ? (threads_here[static_cast<size_t>(thread)] ? threads_here[static_cast<size_t>(thread)]
                                                                        : link_->final_status(thread))
                           : by_thread[static_cast<size_t>(thread)][static_cast<size_t>(peer / threads())];
        }
        return answers;
    }
    std::optional<Clock::time_point> last_heard_from(int peer) override {
        return here(peer) ? first().last_heard_from(peer % threads()) : mpi().last_heard_from(peer / threads());
    }
    std::optional<HeardStatus> last_status(int peer) override {
        return here(peer) ? first().last_status(peer % threads()) : mpi().last_status(peer / threads());
    }
    void ping(std::span<const int> peers) override {
        std::vector<int> others;
        for (int peer : peers)
            if (!here(peer)) others.push_back(peer / threads());
        std::sort(others.begin(), others.end());
        others.erase(std::unique(others.begin(), others.end()), others.end());
        mpi().ping(others);
    }
    bool answers_in_background() const override { return true; }
    std::vector<ProcessIdentity> processes() const override {
        std::vector<ProcessIdentity> by_rank;
        for (const ProcessIdentity& process : mpi().processes())
            by_rank.insert(by_rank.end(), static_cast<size_t>(threads()), process);
        return by_rank;
    }

    // Only the last thread of a process waits for the other processes: the
    // others have nothing left that a peer could touch (as in a local group).
    std::unique_ptr<Pending> start_finalize_barrier() override {
        return link_->last_at_finalize() ? mpi().start_finalize_barrier() : nullptr;
    }
    void finalize(bool peers_present) override {
        link_->set_status(thread_, nullptr);  // the other processes stop reading this thread's status
        first_->finalize(peers_present);
        again_->finalize(peers_present);
        link_->release(peers_present);
    }

    // Thread 0 makes every new group of this process's threads; each
    // thread then takes its own (split_plan.hpp says which shapes can be
    // made).
    std::unique_ptr<Transport> split(int, int, std::span<const std::pair<int, int>> every_rank,
                                     Clock::time_point deadline) override {
        const std::vector<mixed::ColorPlan> plans = mixed::plan_split(every_rank, threads());
        const uint64_t split = splits_++;
        if (leads()) make_split(split, plans, deadline);
        return link_->splits().take(split, thread_, deadline);
    }

private:
    // Every color in ascending order, on every process alike: MPI splits
    // the processes with threads in it, and this process's threads in it
    // get the transports of a new group of processes x threads. A process
    // that fails still takes part in every later color's MPI split (as in
    // none), and the processes then agree whether all made their groups: a
    // group one process lacks would leave its other members waiting.
    void make_split(uint64_t split, std::span<const mixed::ColorPlan> plans, Clock::time_point deadline) {
        std::vector<std::unique_ptr<Transport>> by_thread(static_cast<size_t>(threads()));
        std::optional<Error> failed;
        for (const mixed::ColorPlan& plan : plans) {
            const auto at = std::find(plan.processes.begin(), plan.processes.end(), link_->process());
            const bool in = at != plan.processes.end() && !failed;
            const auto order = static_cast<int>(at - plan.processes.begin());
            try {
                std::unique_ptr<Transport> processes = link_->split_processes(in ? plan.color : -1, order, deadline);
                if (!in) continue;
                // Collective over the color's processes, which all get here.
                auto in_front = make_planes_between_processes(*processes, link_->switches(), deadline);
                std::vector<std::unique_ptr<Transport>> made =
                    make_mixed_transports(std::move(processes), std::move(in_front), link_->switches(), plan.threads);
                for (int i = 0; i < plan.threads; ++i) {
                    const int parent_rank = plan.ranks[static_cast<size_t>(order * plan.threads + i)];
                    by_thread[static_cast<size_t>(parent_rank % threads())] = std::move(made[static_cast<size_t>(i)]);
                }
            } catch (...) {
                std::string message;
                const ddp_status status = status_of_exception(std::current_exception(), message);
                if (!failed) failed = Error(status, message);
            }
        }
        try {
            const double seconds_left = std::chrono::duration<double>(deadline - Clock::now()).count();
            fail_together(mpi(), failed, std::max(seconds_left, 1e-3), DDP_ERR_BACKEND,
                          "(MPI ranks: processes of this group) could not make their threads' new groups in "
                          "comm_split (their error says why)");
            link_->splits().give(split, std::move(by_thread));
        } catch (...) {
            std::string message;
            const ddp_status status = status_of_exception(std::current_exception(), message);
            link_->splits().give_failure(split, status, message);
        }
    }

    int threads() const { return link_->threads(); }
    bool leads() const { return thread_ == 0; }
    /// Whether `peer` is a thread of this process.
    bool here(int peer) const { return peer / threads() == link_->process(); }
    ControlChannel& first() { return first_->channel(); }
    ControlChannel& again() { return again_->channel(); }
    /// The MPI channel between the processes (thread 0 of each carries its threads' part).
    ControlChannel& mpi() { return link_->channel(); }
    const ControlChannel& mpi() const { return link_->channel(); }

    std::shared_ptr<mixed::ProcessLink> link_;
    int thread_;
    std::unique_ptr<Transport> first_, again_;
    mixed::Gates gates_;
    mixed::MixedPlane plane_;
    uint64_t splits_ = 0;  ///< this rank's splits so far: every rank numbers them alike
};

}  // namespace

std::vector<std::unique_ptr<Transport>> make_mixed_transports(std::unique_ptr<Transport> processes,
                                                              std::vector<std::unique_ptr<HostPlane>> in_front,
                                                              const PlaneSwitches& switches, int threads) {
    auto link = std::make_shared<mixed::ProcessLink>(std::move(processes), std::move(in_front), switches, threads);
    const int first_rank = link->process() * threads;
    std::vector<std::unique_ptr<Transport>> first = make_local_transports(threads, first_rank);
    std::vector<std::unique_ptr<Transport>> again = make_local_transports(threads, first_rank);
    std::vector<std::unique_ptr<Transport>> transports;
    for (int thread = 0; thread < threads; ++thread)
        transports.push_back(std::make_unique<MixedTransport>(link, thread, std::move(first[static_cast<size_t>(thread)]),
                                                              std::move(again[static_cast<size_t>(thread)])));
    return transports;
}

}  // namespace ddp
