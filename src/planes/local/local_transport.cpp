// The transport of a group whose ranks are threads of one process
// (ddp_init_local): its control channel meets the peers in rounds in the
// process's memory (local_group.hpp), its host plane reads their buffers
// directly (in_process_plane.hpp). No rank can die apart from the others,
// so nothing here looks for dead peers; a thread that stops calling is
// named by its peers' timeout, from the status the group reads off it.
#include <algorithm>
#include <string>
#include <cstring>

#include "planes/local/in_process_plane.hpp"
#include "planes/local/local_group.hpp"
#include "planes/local/round_pending.hpp"
#include "planes/shm/combine.hpp"
#include "planes/transport.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

using local::Group;
using local::Lane;
using local::Round;
using local::RoundPending;

class LocalTransport final : public Transport, public ControlChannel {
public:
    LocalTransport(std::shared_ptr<Group> group, int rank, int first_rank)
        : group_(std::move(group)), rank_(rank), first_rank_(first_rank), plane_(group_, rank) {}
    ~LocalTransport() override { group_->set_status_source(rank_, nullptr); }

    const char* name() const override { return "local"; }
    ControlChannel& channel() override { return *this; }
    std::vector<HostPlane*> host_planes() override { return {&plane_}; }
    bool ranks_are_threads() const override { return true; }

    int rank() const override { return rank_; }
    int size() const override { return group_->size(); }
    int local_rank() const override { return rank_; }
    int local_size() const override { return group_->size(); }
    int ranks_in_this_process() const override { return group_->size(); }
    int node_leader() const override { return 0; }
    bool allows_background_thread() const override { return true; }
    bool allows_concurrent_calls() const override { return true; }

    std::unique_ptr<Pending> start_max_u64(std::span<uint64_t> values) override {
        return start_max_u64_carrying(values, nullptr, 0, DDP_DTYPE_U8, DDP_OP_SUM);
    }
    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                    ddp_dtype dtype, ddp_op op) override {
        const size_t bytes = carried != nullptr ? static_cast<size_t>(count) * element_size(dtype) : 0;
        std::vector<std::byte> mine(bytes);
        if (bytes > 0) std::memcpy(mine.data(), carried, bytes);
        return exchange({values.begin(), values.end()}, std::move(mine), [=](Round& round) {
            for (const auto& words : round.words)
                for (size_t i = 0; i < values.size() && i < words.size(); ++i) values[i] = std::max(values[i], words[i]);
            // Ranks that passed different calls carry different bytes; the
            // words say so, and the data means nothing then.
            const bool alike = std::all_of(round.bytes.begin(), round.bytes.end(),
                                           [&](const auto& theirs) { return theirs.size() == bytes; });
            if (bytes == 0 || !alike) return;
            std::vector<const std::byte*> inputs;
            for (const auto& theirs : round.bytes) inputs.push_back(theirs.data());
            shm::combine_in_rank_order(carried, inputs, 0, count, dtype, op);
        });
    }
    std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words,
                                                 std::vector<std::vector<uint64_t>>& by_rank) override {
        return exchange({words.begin(), words.end()}, {}, [&by_rank](Round& round) { by_rank = round.words; });
    }
    void abandon(std::unique_ptr<Pending> pending) override {
        std::lock_guard lock(abandoned_mutex_);
        abandoned_.push_back(std::move(pending));
    }

    void start_control(const StatusSource& status) override {
        group_->set_status_source(rank_, [status] { return status(0); });
    }
    void poll_control() override {}
    // Notices name their senders as the widest group does (first_rank_ + rank).
    std::optional<AbortNotice> abort_notice() override { return group_->notice_for(first_rank_ + rank_); }
    void send_abort(const AbortNotice& notice) override { group_->post_notice(notice); }
    std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point, int) override {
        std::vector<std::optional<PeerStatus>> answers(static_cast<size_t>(size()));
        for (int peer = 0; peer < size(); ++peer)
            if (peer != rank_) answers[static_cast<size_t>(peer)] = group_->status_of(peer);
        return answers;
    }
    // Peers in this process are always heard: their status is read, not sent.
    std::optional<Clock::time_point> last_heard_from(int) override { return Clock::now(); }
    std::optional<HeardStatus> last_status(int peer) override {
        if (auto status = group_->status_of(peer)) return HeardStatus{*status, Clock::now()};
        return std::nullopt;
    }
    void ping(std::span<const int>) override {}
    bool answers_in_background() const override { return true; }

    // A rank's finalize waits for no peer here: once its calls have returned
    // no peer reads or writes its memory (a data round ends only when every
    // rank has done its part, a control round owns its copies, the group
    // outlives every rank), and its peers' later calls fail on its notice.
    // So one thread may finalize every rank in turn.
    std::unique_ptr<Pending> start_finalize_barrier() override { return nullptr; }
    // Peers stop reading this rank's status before its control plane goes.
    void finalize(bool) override { group_->set_status_source(rank_, nullptr); }

    // The ranks of one color share a new group, made by the first of them
    // to get there.
    std::unique_ptr<Transport> split(int color, int key, std::span<const std::pair<int, int>> every_rank,
                                     Clock::time_point) override {
        const uint64_t number = splits_++;
        if (every_rank.size() != static_cast<size_t>(size()))
            fail(DDP_ERR_INTERNAL, "a local group's split needs every rank's color and key");
        if (color < 0) return nullptr;
        std::vector<std::pair<int, int>> members;  // (key, rank) of this color's ranks
        for (int peer = 0; peer < size(); ++peer)
            if (every_rank[static_cast<size_t>(peer)].first == color)
                members.emplace_back(every_rank[static_cast<size_t>(peer)].second, peer);
        std::sort(members.begin(), members.end());
        const auto me = std::find(members.begin(), members.end(), std::pair<int, int>{key, rank_});
        return std::make_unique<LocalTransport>(group_->child(number, color, static_cast<int>(members.size())),
                                                static_cast<int>(me - members.begin()), 0);
    }

private:
    /// This rank's next control round with `words` and `bytes`; `finish`
    /// reads every rank's once all are there.
    std::unique_ptr<Pending> exchange(std::vector<uint64_t> words, std::vector<std::byte> bytes,
                                      std::function<void(Round&)> finish) {
        const uint64_t number = next_round_.fetch_add(1, std::memory_order_relaxed);
        std::shared_ptr<Round> round = group_->round(Lane::control, number);
        round->words[static_cast<size_t>(rank_)] = std::move(words);
        round->bytes[static_cast<size_t>(rank_)] = std::move(bytes);
        group_->count_in(round->arrived);
        return std::make_unique<RoundPending>(group_, Lane::control, number, std::move(round), std::move(finish),
                                              false);
    }

    std::shared_ptr<Group> group_;
    int rank_;
    int first_rank_;
    local::InProcessPlane plane_;
    std::atomic<uint64_t> next_round_{0};
    uint64_t splits_ = 0;  // splits run in call order on every rank
    std::mutex abandoned_mutex_;
    std::vector<std::unique_ptr<Pending>> abandoned_;
};

}  // namespace

std::vector<std::unique_ptr<Transport>> make_local_transports(int size, int first_rank) {
    auto group = std::make_shared<Group>(size);
    std::vector<std::unique_ptr<Transport>> transports;
    for (int rank = 0; rank < size; ++rank)
        transports.push_back(std::make_unique<LocalTransport>(group, rank, first_rank));
    return transports;
}

}  // namespace ddp
