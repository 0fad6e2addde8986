#include "planes/mpi/mpi_channel.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>

#include "planes/mpi/mpi_requests.hpp"
#include "planes/mpi/recursive_doubling.hpp"
#include "util/dtype.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

/// Every rank's words: first the lengths, then the words themselves.
class GatherWords final : public Pending {
public:
    GatherWords(std::span<const uint64_t> words, std::vector<std::vector<uint64_t>>& by_rank, MPI_Comm comm, int size)
        : by_rank_(by_rank), comm_(comm), mine_(words.begin(), words.end()), counts_(static_cast<size_t>(size)) {
        my_count_ = static_cast<int>(mine_.size());
        check(MPI_Iallgather(&my_count_, 1, MPI_INT, counts_.data(), 1, MPI_INT, comm_, &request_),
              "MPI_Iallgather");
    }
    bool test() override {
        int done = 0;
        check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done) return false;
        if (!gathering_words_) {
            offsets_.resize(counts_.size());
            int total = 0;
            for (size_t r = 0; r < counts_.size(); ++r) {
                offsets_[r] = total;
                total += counts_[r];
            }
            all_.resize(static_cast<size_t>(total));
            check(MPI_Iallgatherv(mine_.data(), my_count_, MPI_UINT64_T, all_.data(), counts_.data(), offsets_.data(),
                                  MPI_UINT64_T, comm_, &request_),
                  "MPI_Iallgatherv");
            gathering_words_ = true;
            return false;
        }
        by_rank_.assign(counts_.size(), {});
        for (size_t r = 0; r < counts_.size(); ++r)
            by_rank_[r].assign(all_.begin() + offsets_[r], all_.begin() + offsets_[r] + counts_[r]);
        return true;
    }

private:
    std::vector<std::vector<uint64_t>>& by_rank_;
    MPI_Comm comm_;
    std::vector<uint64_t> mine_;
    int my_count_ = 0;
    std::vector<int> counts_, offsets_;
    std::vector<uint64_t> all_;
    bool gathering_words_ = false;
    MPI_Request request_ = MPI_REQUEST_NULL;
};

// Tags on the control communicator.
// A heartbeat (ping) is answered on pong_tag with the answerer's status.
enum ControlTag : int { query_tag = 1, reply_tag = 2, abort_tag = 3, ping_tag = 4, pong_tag = 5 };

// A question's word: the asker's nonce above the part of the rank it asks
// about (StatusSource) in the low bits; the answer carries it back.
constexpr int part_bits = 16;
constexpr uint64_t part_mask = (uint64_t{1} << part_bits) - 1;

class Channel final : public MpiChannel {
public:
    Channel(MpiDataComm& data, MPI_Comm control, int thread_level)
        : data_(data), control_(control), thread_level_(thread_level) {
        check(MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        MPI_Comm node;
        check(MPI_Comm_split_type(data_.comm, MPI_COMM_TYPE_SHARED, data_.rank, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
        MPI_Comm_rank(node, &local_rank_);
        MPI_Comm_size(node, &local_size_);
        // The node's local rank 0 is its smallest rank here (the key was the rank).
        MPI_Group node_group, group;
        MPI_Comm_group(node, &node_group);
        MPI_Comm_group(data_.comm, &group);
        const int first = 0;
        MPI_Group_translate_ranks(node_group, 1, &first, group, &node_leader_);
        MPI_Group_free(&node_group);
        MPI_Group_free(&group);
        MPI_Comm_free(&node);
        // Every rank's process, for finding dead peers on this host.
        constexpr int words = ProcessIdentity::words;
        const std::vector<uint64_t> mine = this_process().to_words();
        std::vector<uint64_t> all(words * static_cast<size_t>(data_.size));
        check(MPI_Allgather(mine.data(), words, MPI_UINT64_T, all.data(), words, MPI_UINT64_T, control_),
              "MPI_Allgather");
        processes_.resize(static_cast<size_t>(data_.size));
        for (size_t r = 0; r < processes_.size(); ++r)
            processes_[r] = ProcessIdentity::from_words(std::span(all).subspan(words * r, words));
        heard_.assign(static_cast<size_t>(data_.size), Clock::time_point::min());
        said_.assign(static_cast<size_t>(data_.size), std::nullopt);
        post_control_receives();
    }

    ~Channel() override {
        try {
            finalize(false);
        } catch (const Error&) {
            // Destructors must not throw; finalize() reports errors when called directly.
        }
    }

    const char* name() const override { return "mpi"; }
    int rank() const override { return data_.rank; }
    int size() const override { return data_.size; }
    int local_rank() const override { return local_rank_; }
    int local_size() const override { return local_size_; }
    int node_leader() const override { return node_leader_; }
    bool allows_background_thread() const override { return thread_level_ >= MPI_THREAD_SERIALIZED; }
    bool allows_concurrent_calls() const override { return thread_level_ >= MPI_THREAD_MULTIPLE; }

    std::unique_ptr<Pending> start_max_u64(std::span<uint64_t> values) override {
        return start_max_u64_carrying(values, nullptr, 0, DDP_DTYPE_U8, DDP_OP_MAX);
    }

    // What the mpi plane would send by recursive doubling rides in
    // agreement's rounds, which are recursive doubling too: one round a call.
    int64_t carried_capacity() const override { return recursive_doubling_max_bytes; }

    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                    ddp_dtype dtype, ddp_op op) override {
        const std::span<std::byte> data(static_cast<std::byte*>(carried),
                                        static_cast<size_t>(count) * element_size(dtype));
        // Agreement's messages all have room for the most a peer may carry:
        // a peer in another call sends words of its own, and must be read.
        const size_t capacity = std::max(values.size_bytes(), max_agreement_words * sizeof(uint64_t) +
                                                                  static_cast<size_t>(carried_capacity()));
        return std::make_unique<RecursiveDoubling>(
            data_.comm, data_.rank, data_.size, data_.next_tag(), values, data,
            MessageData{static_cast<int>(count), mpi_type(dtype), data_.ops->get(dtype, op)}, capacity,
            [values, data](std::span<const uint64_t> words, std::span<const std::byte> result) {
                std::copy(words.begin(), words.end(), values.begin());
                std::copy(result.begin(), result.end(), data.begin());
            });
    }

    std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words,
                                                 std::vector<std::vector<uint64_t>>& by_rank) override {
        return std::make_unique<GatherWords>(words, by_rank, data_.comm, data_.size);
    }

    void abandon(std::unique_ptr<Pending> pending) override {
        std::lock_guard lock(control_mutex_);
        abandoned_.push_back(std::move(pending));
    }

    void start_control(const StatusSource& status) override {
        status_ = status;
        // Without MPI_THREAD_MULTIPLE only the waiting loops answer peers.
        if (!allows_concurrent_calls()) return;
        responder_ = std::thread([this] {
            std::unique_lock lock(responder_mutex_);
            while (!stop_responder_) {
                lock.unlock();
                try {
                    poll_control();
                } catch (const Error& error) {
                    // MPI failed under us: waiting loops report it. From now
                    // on no peer hears from this rank between its waits,
                    // which they may take for a death: say so once.
                    log_line(data_.rank, data_.size, DDP_LOG_WARN,
                             std::string("control thread stopped (peers' questions and heartbeats go unanswered "
                                         "outside this rank's waits): ") +
                                 error.what());
                    return;
                }
                lock.lock();
                responder_wake_.wait_for(lock, std::chrono::milliseconds(10));
            }
        });
    }

    void poll_control() override {
        std::lock_guard lock(control_mutex_);
        if (control_ == MPI_COMM_NULL) return;
        int done = 0;
        MPI_Status status;
        check(MPI_Test(&query_receive_, &done, &status), "MPI_Test");
        if (done) {
            heard(status.MPI_SOURCE);
            const PeerStatus mine = status_ ? status_(static_cast<int>(query_word_ & part_mask)) : PeerStatus{};
            // The asker's nonce comes back so it can tell this answer from a late one.
            auto& reply = replies_.emplace_back();
            reply.words = {query_word_, mine.sequence, mine.kind, mine.in_call ? 1u : 0u, mine.label};
            check(MPI_Isend(reply.words.data(), 5, MPI_UINT64_T, status.MPI_SOURCE, reply_tag, control_,
                            &reply.request),
                  "MPI_Isend");
            check(MPI_Irecv(&query_word_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, query_tag, control_, &query_receive_),
                  "MPI_Irecv");
        }
        check(MPI_Test(&ping_receive_, &done, &status), "MPI_Test");
        if (done) {
            heard(status.MPI_SOURCE);
            const PeerStatus mine = status_ ? status_(0) : PeerStatus{};
            auto& pong = replies_.emplace_back();
            pong.words = {mine.sequence, mine.kind, mine.in_call ? 1u : 0u, mine.label};
            check(MPI_Isend(pong.words.data(), 4, MPI_UINT64_T, status.MPI_SOURCE, pong_tag, control_, &pong.request),
                  "MPI_Isend");
            check(MPI_Irecv(&ping_word_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, ping_tag, control_, &ping_receive_),
                  "MPI_Irecv");
        }
        check(MPI_Test(&pong_receive_, &done, &status), "MPI_Test");
        if (done) {
            said(status.MPI_SOURCE, PeerStatus{pong_words_[0], pong_words_[1], pong_words_[2] != 0, pong_words_[3]});
            check(MPI_Irecv(pong_words_.data(), 4, MPI_UINT64_T, MPI_ANY_SOURCE, pong_tag, control_, &pong_receive_),
                  "MPI_Irecv");
        }
        check(MPI_Test(&abort_receive_, &done, &status), "MPI_Test");
        if (done) {
            const AbortNotice arrived{static_cast<int>(abort_words_[0]), abort_words_[1], abort_words_[2],
                                      static_cast<AbortNotice::Reason>(abort_words_[3]),
                                      static_cast<int>(static_cast<int64_t>(abort_words_[4])), abort_words_[5]};
            // From the sending process (a notice names its rank as its own
            // group numbers it: a process of threads names the thread).
            heard(status.MPI_SOURCE);
            notice_ = notice_to_keep(notice_, arrived);
            has_notice_.store(true, std::memory_order_release);
            check(MPI_Irecv(abort_words_.data(), 6, MPI_UINT64_T, MPI_ANY_SOURCE, abort_tag, control_,
                            &abort_receive_),
                  "MPI_Irecv");
        }
        std::erase_if(replies_, [](Message& reply) {
            int sent = 0;
            MPI_Test(&reply.request, &sent, MPI_STATUS_IGNORE);
            return sent != 0;
        });
    }

    std::optional<AbortNotice> abort_notice() override {
        if (!has_notice_.load(std::memory_order_acquire)) return std::nullopt;  // the hot path: no lock
        std::lock_guard lock(control_mutex_);
        return notice_;
    }

    void send_abort(const AbortNotice& notice) override {
        std::lock_guard lock(control_mutex_);
        for (int peer = 0; peer < data_.size; ++peer) {
            if (peer == data_.rank) continue;
            auto& message = aborts_sent_.emplace_back();
            message.words = {static_cast<uint64_t>(notice.from_rank), notice.sequence, notice.kind,
                             static_cast<uint64_t>(notice.reason),
                             static_cast<uint64_t>(static_cast<int64_t>(notice.dead_rank)), notice.label};
            // A peer that died makes this fail or never finish; neither matters.
            MPI_Isend(message.words.data(), 6, MPI_UINT64_T, peer, abort_tag, control_, &message.request);
        }
    }

    std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point deadline, int part) override {
        std::vector<std::optional<PeerStatus>> answers(static_cast<size_t>(data_.size));
        // Lists: MPI holds pointers into each message until it finishes.
        std::list<Message> questions, receipts;
        uint64_t asked = 0;  // this question's word: the nonce, then the part asked about
        {
            std::lock_guard lock(control_mutex_);
            ++nonce_;
            asked = nonce_ << part_bits | (static_cast<uint64_t>(part) & part_mask);
            for (int peer = 0; peer < data_.size; ++peer) {
                if (peer == data_.rank) continue;
                auto& question = questions.emplace_back();
                question.words[0] = asked;
                question.peer = peer;
                check(MPI_Isend(question.words.data(), 1, MPI_UINT64_T, peer, query_tag, control_, &question.request),
                      "MPI_Isend");
                auto& receipt = receipts.emplace_back();
                receipt.peer = peer;
                check(MPI_Irecv(receipt.words.data(), 5, MPI_UINT64_T, peer, reply_tag, control_, &receipt.request),
                      "MPI_Irecv");
            }
        }
        size_t missing = receipts.size();
        while (missing > 0 && Clock::now() < deadline) {
            poll_control();  // peers asking at the same time get their answer too
            std::lock_guard lock(control_mutex_);
            for (auto& receipt : receipts) {
                if (receipt.request == MPI_REQUEST_NULL) continue;
                int done = 0;
                check(MPI_Test(&receipt.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
                if (!done) continue;
                heard(receipt.peer);
                if (receipt.words[0] != asked) {  // a late answer to an earlier question
                    check(MPI_Irecv(receipt.words.data(), 5, MPI_UINT64_T, receipt.peer, reply_tag, control_,
                                    &receipt.request),
                          "MPI_Irecv");
                    continue;
                }
                answers[static_cast<size_t>(receipt.peer)] =
                    PeerStatus{receipt.words[1], receipt.words[2], receipt.words[3] != 0, receipt.words[4]};
                // What the rank as a whole said; a part's answer is the asker's alone.
                if (part == 0) said(receipt.peer, *answers[static_cast<size_t>(receipt.peer)]);
                --missing;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::lock_guard lock(control_mutex_);
        for (auto& receipt : receipts) {
            if (receipt.request == MPI_REQUEST_NULL) continue;
            MPI_Cancel(&receipt.request);
            MPI_Request_free(&receipt.request);
        }
        replies_.splice(replies_.end(), questions);  // sends still in flight finish in later polls
        return answers;
    }

    std::optional<Clock::time_point> last_heard_from(int peer) override {
        std::lock_guard lock(control_mutex_);
        const Clock::time_point when = heard_.at(static_cast<size_t>(peer));
        if (when == Clock::time_point::min()) return std::nullopt;
        return when;
    }

    std::optional<HeardStatus> last_status(int peer) override {
        std::lock_guard lock(control_mutex_);
        return said_.at(static_cast<size_t>(peer));
    }

    void ping(std::span<const int> peers) override {
        std::lock_guard lock(control_mutex_);
        for (int peer : peers) {
            auto& question = replies_.emplace_back();
            // A peer that died makes this fail or never finish; neither matters.
            MPI_Isend(question.words.data(), 1, MPI_UINT64_T, peer, ping_tag, control_, &question.request);
        }
    }

    bool answers_in_background() const override { return responder_.joinable(); }
    std::vector<ProcessIdentity> processes() const override { return processes_; }

    std::unique_ptr<Pending> start_finalize_barrier() override {
        std::lock_guard lock(control_mutex_);
        auto barrier = std::make_unique<Requests>();
        check(MPI_Ibarrier(control_, barrier->add()), "MPI_Ibarrier");
        return barrier;
    }

    bool abandoned_any() override {
        std::lock_guard lock(control_mutex_);
        return !abandoned_.empty();
    }

    void finalize(bool peers_present) override {
        stop_responder();
        std::lock_guard lock(control_mutex_);
        if (control_ == MPI_COMM_NULL) return;
        if (!peers_present) {
            // A peer is gone or stuck: anything collective could wait for
            // ever, so MPI is left as it is and the process may exit.
            control_ = MPI_COMM_NULL;
            return;
        }
        for (MPI_Request* receive : {&query_receive_, &abort_receive_, &ping_receive_, &pong_receive_}) {
            MPI_Cancel(receive);
            MPI_Wait(receive, MPI_STATUS_IGNORE);
        }
        for (auto* messages : {&replies_, &aborts_sent_})
            for (Message& message : *messages)
                if (message.request != MPI_REQUEST_NULL) MPI_Request_free(&message.request);
        check(MPI_Comm_free(&control_), "MPI_Comm_free");
        control_ = MPI_COMM_NULL;
    }

private:
    struct Message {
        std::array<uint64_t, 6> words{};
        MPI_Request request = MPI_REQUEST_NULL;
        int peer = -1;
    };

    /// Notes that a control message came from `peer` (control_mutex_ held).
    void heard(int peer) {
        if (peer >= 0 && peer < data_.size) heard_[static_cast<size_t>(peer)] = Clock::now();
    }

    /// Notes what `peer` said it was doing (control_mutex_ held).
    void said(int peer, const PeerStatus& status) {
        if (peer < 0 || peer >= data_.size) return;
        heard(peer);
        said_[static_cast<size_t>(peer)] = HeardStatus{status, Clock::now()};
    }

    void post_control_receives() {
        check(MPI_Irecv(&ping_word_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, ping_tag, control_, &ping_receive_),
              "MPI_Irecv");
        check(MPI_Irecv(pong_words_.data(), 4, MPI_UINT64_T, MPI_ANY_SOURCE, pong_tag, control_, &pong_receive_),
              "MPI_Irecv");
        check(MPI_Irecv(&query_word_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, query_tag, control_, &query_receive_),
              "MPI_Irecv");
        check(MPI_Irecv(abort_words_.data(), 6, MPI_UINT64_T, MPI_ANY_SOURCE, abort_tag, control_, &abort_receive_),
              "MPI_Irecv");
    }

    void stop_responder() {
        {
            std::lock_guard lock(responder_mutex_);
            stop_responder_ = true;
        }
        responder_wake_.notify_all();
        if (responder_.joinable()) responder_.join();
    }

    MpiDataComm& data_;
    MPI_Comm control_ = MPI_COMM_NULL;
    int thread_level_ = MPI_THREAD_SINGLE;
    int local_rank_ = 0, local_size_ = 1, node_leader_ = 0;

    // Control plane state, guarded by control_mutex_ (the responder thread
    // and the waiting loops both receive).
    std::mutex control_mutex_;
    StatusSource status_;
    uint64_t query_word_ = 0;
    std::array<uint64_t, 6> abort_words_{};
    uint64_t ping_word_ = 0;
    std::array<uint64_t, 4> pong_words_{};
    MPI_Request query_receive_ = MPI_REQUEST_NULL, abort_receive_ = MPI_REQUEST_NULL;
    MPI_Request ping_receive_ = MPI_REQUEST_NULL, pong_receive_ = MPI_REQUEST_NULL;
    std::list<Message> replies_, aborts_sent_;  // lists: MPI holds pointers into them
    std::optional<AbortNotice> notice_;
    std::atomic<bool> has_notice_{false};
    uint64_t nonce_ = 0;
    std::vector<Clock::time_point> heard_;  ///< per peer; min(): never
    std::vector<std::optional<HeardStatus>> said_;  ///< per peer
    std::vector<ProcessIdentity> processes_;  ///< by rank, from set_up
    std::vector<std::unique_ptr<Pending>> abandoned_;

    std::mutex responder_mutex_;
    std::condition_variable responder_wake_;
    bool stop_responder_ = false;
    std::thread responder_;
};

}  // namespace

std::unique_ptr<MpiChannel> make_mpi_channel(MpiDataComm& data, MPI_Comm control, int thread_level) {
    return std::make_unique<Channel>(data, control, thread_level);
}

}  // namespace ddp
