// The MPI transport: Open MPI (or any MPI-3 library) on host buffers. One
// object is the control channel and the host data plane, since both run
// over the same MPI communicators.
//
// Every operation is non-blocking (MPI_Iallreduce, MPI_Ibcast, ..., and
// point-to-point recursive doubling for small messages) so that
// the control plane can hold it to a deadline: a blocking MPI call waits for
// ever on a peer that died. Data travels on one duplicate of the caller's
// communicator; control messages (status questions, abort notices, the
// finalize barrier) on a second, so that they never meet.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <list>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "planes/mpi/capabilities.hpp"
#include "planes/mpi/mpi_check.hpp"
#include "planes/mpi/recursive_doubling.hpp"
#include "planes/transport.hpp"
#include "device/cpu/elementwise.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

// MPI has no 16-bit float types, and its MIN/MAX on floats return whichever
// operand the comparison picks when one is NaN. Those reductions use
// user-defined operations over libddp's own element-wise code.
template <ddp_dtype Dtype, ddp_op Op>
void user_reduction(void* in, void* inout, int* length, MPI_Datatype*) {
    reduce_into(inout, in, *length, Dtype, Op);
}

class UserOps {
public:
    UserOps() {
        create<DDP_DTYPE_F16>(f16_);
        create<DDP_DTYPE_BF16>(bf16_);
        create<DDP_DTYPE_F32>(f32_);
        create<DDP_DTYPE_F64>(f64_);
    }
    ~UserOps() {
        for (auto* table : {&f16_, &bf16_, &f32_, &f64_})
            for (MPI_Op& op : *table) MPI_Op_free(&op);
    }
    UserOps(const UserOps&) = delete;
    UserOps& operator=(const UserOps&) = delete;

    /// The operation for (dtype, op), or MPI_OP_NULL when a built-in one is right.
    MPI_Op get(ddp_dtype dtype, ddp_op op) const {
        switch (dtype) {
        case DDP_DTYPE_F16: return f16_[slot(op)];
        case DDP_DTYPE_BF16: return bf16_[slot(op)];
        case DDP_DTYPE_F32: return op == DDP_OP_MIN || op == DDP_OP_MAX ? f32_[slot(op)] : MPI_OP_NULL;
        case DDP_DTYPE_F64: return op == DDP_OP_MIN || op == DDP_OP_MAX ? f64_[slot(op)] : MPI_OP_NULL;
        default: return MPI_OP_NULL;
        }
    }

private:
    using Table = std::array<MPI_Op, 4>;
    static size_t slot(ddp_op op) {
        switch (op) {
        case DDP_OP_SUM: return 0;
        case DDP_OP_PROD: return 1;
        case DDP_OP_MIN: return 2;
        default: return 3;  // MAX; AVG never reaches a backend
        }
    }
    template <ddp_dtype Dtype>
    static void create(Table& table) {
        check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_SUM>, 1, &table[0]), "MPI_Op_create");
        check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_PROD>, 1, &table[1]), "MPI_Op_create");
        check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_MIN>, 1, &table[2]), "MPI_Op_create");
        check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_MAX>, 1, &table[3]), "MPI_Op_create");
    }
    Table f16_{}, bf16_{}, f32_{}, f64_{};
};

// Open MPI's default choice of non-blocking allreduce algorithm (libnbc)
// is 2-3x slower than its blocking one on large buffers; the Rabenseifner
// algorithm (3) matches or beats it (README, Design decisions). The setting
// is process-wide, so it is made only where nobody chose: the environment
// does not name it and its value is still 0 ("libnbc decides"). Other MPI
// libraries have no such variable, and nothing happens.
// thread_level: MPI's. Open MPI's MPI_T_init_thread makes the level it is
// asked for the process's (MPI_Query_thread says it from then on), so a
// lower one would leave the next ddp_init in this process without async calls.
void choose_nonblocking_allreduce_algorithm(int thread_level) {
    constexpr const char* variable = "coll_libnbc_iallreduce_algorithm";
    constexpr int rabenseifner = 3;
    if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr) return;
    int provided = 0;
    if (MPI_T_init_thread(thread_level, &provided) != MPI_SUCCESS) return;
    int index = 0, count = 0, current = -1;
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_get_index(variable, &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
        if (count == 1 && MPI_T_cvar_read(handle, &current) == MPI_SUCCESS && current == 0)
            MPI_T_cvar_write(handle, &rabenseifner);
        MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
}

MPI_Datatype mpi_type(ddp_dtype dtype) {
    switch (dtype) {
    case DDP_DTYPE_I8: return MPI_INT8_T;
    case DDP_DTYPE_I32: return MPI_INT32_T;
    case DDP_DTYPE_I64: return MPI_INT64_T;
    case DDP_DTYPE_U8: return MPI_UINT8_T;
    case DDP_DTYPE_F32: return MPI_FLOAT;
    case DDP_DTYPE_F64: return MPI_DOUBLE;
    default: return MPI_UINT16_T;  // f16, bf16
    }
}

MPI_Op mpi_builtin_op(ddp_op op) {
    switch (op) {
    case DDP_OP_SUM: return MPI_SUM;
    case DDP_OP_PROD: return MPI_PROD;
    case DDP_OP_MIN: return MPI_MIN;
    default: return MPI_MAX;
    }
}

// Allreduces up to this many bytes go by recursive doubling (point to point):
// latency-bound sizes, where MPI_Iallreduce is slowest (recursive_doubling.hpp).
constexpr int64_t small_allreduce_bytes = 16384;

// MPI counts are int: longer buffers go in pieces of at most this many elements.
constexpr int64_t max_chunk = INT_MAX / 2;

/// MPI requests that finish together (the chunks of one buffer).
class Requests final : public Pending {
public:
    bool test() override {
        int done = 0;
        check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
        return done != 0;
    }
    MPI_Request* add() { return &requests_.emplace_back(MPI_REQUEST_NULL); }

private:
    std::vector<MPI_Request> requests_;
};

template <typename Start>
std::unique_ptr<Pending> in_chunks(void* data, int64_t count, size_t element_bytes, Start start) {
    auto requests = std::make_unique<Requests>();
    auto* bytes = static_cast<char*>(data);
    for (int64_t done = 0; done < count;) {
        const int64_t piece = std::min(count - done, max_chunk);
        start(bytes + done * static_cast<int64_t>(element_bytes), static_cast<int>(piece), requests->add());
        done += piece;
    }
    return requests;
}

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

class MpiTransport final : public Transport, public ControlChannel, public HostPlane {
public:
    /// The world: starts MPI (or adopts a running one, and the caller's
    /// communicator) and duplicates the base communicator twice.
    explicit MpiTransport(int64_t mpi_comm_fortran) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (finalized)
            fail(DDP_ERR_ALREADY_INITIALIZED, "MPI was already finalized in this process and cannot start again");
        if (mpi_comm_fortran != DDP_NO_MPI_COMM && !initialized)
            fail(DDP_ERR_INVALID_ARGUMENT, "mpi_comm_fortran names a communicator but MPI is not initialized");
        if (initialized) {
            check(MPI_Query_thread(&thread_level_), "MPI_Query_thread");
        } else {
            check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_), "MPI_Init_thread");
            owns_mpi_ = true;
        }
        choose_nonblocking_allreduce_algorithm(thread_level_);
        MPI_Comm base = MPI_COMM_WORLD;
        if (mpi_comm_fortran != DDP_NO_MPI_COMM) {
            base = MPI_Comm_f2c(static_cast<MPI_Fint>(mpi_comm_fortran));
            if (base == MPI_COMM_NULL || base == nullptr)
                fail(DDP_ERR_INVALID_ARGUMENT, "mpi_comm_fortran " + std::to_string(mpi_comm_fortran) +
                                                   " is not a valid MPI communicator handle");
        }
        // Private duplicates keep libddp's traffic apart from the caller's.
        check(MPI_Comm_dup(base, &comm_), "MPI_Comm_dup");
        check(MPI_Comm_dup(base, &control_), "MPI_Comm_dup");
        set_up();
    }

    /// A sub-communicator over `comm` (from MPI_Comm_split, now this
    /// backend's data channel), with a control channel of its own. MPI stays
    /// the world's to finalize.
    MpiTransport(MPI_Comm comm, int thread_level) : comm_(comm), thread_level_(thread_level) {
        check(MPI_Comm_dup(comm_, &control_), "MPI_Comm_dup");
        set_up();
    }

    ~MpiTransport() override {
        try {
            finalize(false);
        } catch (const Error&) {
            // Destructors must not throw; finalize() reports errors when called directly.
        }
    }

    const char* name() const override { return "mpi"; }
    ControlChannel& channel() override { return *this; }
    std::vector<HostPlane*> host_planes() override { return {this}; }
    std::span<const Capability> capabilities() const override { return mpi_capabilities; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int local_rank() const override { return local_rank_; }
    int local_size() const override { return local_size_; }
    bool allows_background_thread() const override { return thread_level_ >= MPI_THREAD_SERIALIZED; }
    bool allows_concurrent_calls() const override { return thread_level_ >= MPI_THREAD_MULTIPLE; }

    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override {
        MPI_Datatype type = mpi_type(dtype);
        MPI_Op mpi_op = op_for(dtype, op);
        const auto bytes = count * static_cast<int64_t>(element_size(dtype));
        if (bytes <= small_allreduce_bytes) {
            const std::span<std::byte> target(static_cast<std::byte*>(data), static_cast<size_t>(bytes));
            return std::make_unique<RecursiveDoubling>(
                comm_, rank_, size_, next_tag(), std::span<const uint64_t>(), target,
                MessageData{static_cast<int>(count), type, mpi_op}, target.size(),
                [target](std::span<const uint64_t>, std::span<const std::byte> result) {
                    std::copy(result.begin(), result.end(), target.begin());
                });
        }
        return in_chunks(data, count, element_size(dtype), [&](void* piece, int n, MPI_Request* request) {
            check(MPI_Iallreduce(MPI_IN_PLACE, piece, n, type, mpi_op, comm_, request), "MPI_Iallreduce");
        });
    }

    std::unique_ptr<Pending> start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) override {
        MPI_Datatype type = mpi_type(dtype);
        MPI_Op mpi_op = op_for(dtype, op);
        return in_chunks(data, count, element_size(dtype), [&](void* piece, int n, MPI_Request* request) {
            if (rank_ == root)
                check(MPI_Ireduce(MPI_IN_PLACE, piece, n, type, mpi_op, root, comm_, request), "MPI_Ireduce");
            else
                check(MPI_Ireduce(piece, nullptr, n, type, mpi_op, root, comm_, request), "MPI_Ireduce");
        });
    }

    std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) override {
        return in_chunks(data, bytes, 1, [&](void* piece, int n, MPI_Request* request) {
            check(MPI_Ibcast(piece, n, MPI_BYTE, root, comm_, request), "MPI_Ibcast");
        });
    }

    std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) override {
        MPI_Datatype type = mpi_type(dtype);
        const auto element = static_cast<int64_t>(element_size(dtype));
        auto* out = static_cast<char*>(recv);
        const bool in_place = send == out + rank_ * count * element;
        auto requests = std::make_unique<Requests>();
        // Longer than an MPI count: in pieces, each rank's piece landing in
        // its block through a receive type stretched to the block's length.
        for (int64_t done = 0; done < count;) {
            const int64_t piece = std::min(count - done, max_chunk);
            const void* from = in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + done * element;
            if (piece == count) {
                check(MPI_Iallgather(from, static_cast<int>(piece), type, out, static_cast<int>(piece), type, comm_,
                                     requests->add()),
                      "MPI_Iallgather");
            } else {
                MPI_Datatype block = MPI_DATATYPE_NULL, stretched = MPI_DATATYPE_NULL;
                check(MPI_Type_contiguous(static_cast<int>(piece), type, &block), "MPI_Type_contiguous");
                check(MPI_Type_create_resized(block, 0, count * element, &stretched), "MPI_Type_create_resized");
                check(MPI_Type_commit(&stretched), "MPI_Type_commit");
                const int started = MPI_Iallgather(from, static_cast<int>(piece), type, out + done * element, 1,
                                                   stretched, comm_, requests->add());
                MPI_Type_free(&stretched);  // MPI keeps it while the operation runs
                MPI_Type_free(&block);
                check(started, "MPI_Iallgather");
            }
            done += piece;
        }
        return requests;
    }

    std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                  ddp_op op) override {
        // The C boundary keeps a shard within one MPI count (max_shard_elements).
        auto requests = std::make_unique<Requests>();
        check(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), mpi_type(dtype), op_for(dtype, op), comm_,
                                        requests->add()),
              "MPI_Ireduce_scatter_block");
        return requests;
    }

    std::unique_ptr<Pending> start_max_u64(std::span<uint64_t> values) override {
        return start_max_u64_carrying(values, nullptr, 0, DDP_DTYPE_U8, DDP_OP_MAX);
    }

    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                    ddp_dtype dtype, ddp_op op) override {
        const std::span<std::byte> data(static_cast<std::byte*>(carried),
                                        static_cast<size_t>(count) * element_size(dtype));
        // Agreement's messages all have room for the most a peer may carry:
        // a peer in another call sends words of its own, and must be read.
        const size_t capacity = std::max(values.size_bytes(), max_agreement_words * sizeof(uint64_t) + max_carried_bytes);
        return std::make_unique<RecursiveDoubling>(
            comm_, rank_, size_, next_tag(), values, data,
            MessageData{static_cast<int>(count), mpi_type(dtype), op_for(dtype, op)}, capacity,
            [values, data](std::span<const uint64_t> words, std::span<const std::byte> result) {
                std::copy(words.begin(), words.end(), values.begin());
                std::copy(result.begin(), result.end(), data.begin());
            });
    }

    std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words,
                                                 std::vector<std::vector<uint64_t>>& by_rank) override {
        return std::make_unique<GatherWords>(words, by_rank, comm_, size_);
    }

    void abandon(std::unique_ptr<Pending> pending) override {
        std::lock_guard lock(control_mutex_);
        abandoned_.push_back(std::move(pending));
    }

    void start_control(const std::function<PeerStatus()>& status) override {
        status_ = status;
        // Without MPI_THREAD_MULTIPLE only the waiting loops answer peers.
        if (!allows_concurrent_calls()) return;
        responder_ = std::thread([this] {
            std::unique_lock lock(responder_mutex_);
            while (!stop_responder_) {
                lock.unlock();
                try {
                    poll_control();
                } catch (const Error&) {
                    return;  // MPI failed under us: waiting loops report it
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
            const PeerStatus mine = status_ ? status_() : PeerStatus{};
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
            const PeerStatus mine = status_ ? status_() : PeerStatus{};
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
        check(MPI_Test(&abort_receive_, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) {
            const AbortNotice arrived{static_cast<int>(abort_words_[0]), abort_words_[1], abort_words_[2],
                                      static_cast<AbortNotice::Reason>(abort_words_[3]),
                                      static_cast<int>(static_cast<int64_t>(abort_words_[4])), abort_words_[5]};
            heard(arrived.from_rank);
            // The first notice stays, except that a peer that stopped (gave up,
            // aborted, failed on its GPU) outranks one that merely finalized:
            // the first may break calls the second still lets finish.
            const bool outranks = notice_ && notice_->reason == AbortNotice::Reason::finalizing &&
                                  arrived.reason != AbortNotice::Reason::finalizing;
            if (!notice_ || outranks) {
                notice_ = arrived;
                has_notice_.store(true, std::memory_order_release);
            }
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
        for (int peer = 0; peer < size_; ++peer) {
            if (peer == rank_) continue;
            auto& message = aborts_sent_.emplace_back();
            message.words = {static_cast<uint64_t>(notice.from_rank), notice.sequence, notice.kind,
                             static_cast<uint64_t>(notice.reason),
                             static_cast<uint64_t>(static_cast<int64_t>(notice.dead_rank)), notice.label};
            // A peer that died makes this fail or never finish; neither matters.
            MPI_Isend(message.words.data(), 6, MPI_UINT64_T, peer, abort_tag, control_, &message.request);
        }
    }

    std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point deadline) override {
        std::vector<std::optional<PeerStatus>> answers(static_cast<size_t>(size_));
        // Lists: MPI holds pointers into each message until it finishes.
        std::list<Message> questions, receipts;
        {
            std::lock_guard lock(control_mutex_);
            ++nonce_;
            for (int peer = 0; peer < size_; ++peer) {
                if (peer == rank_) continue;
                auto& question = questions.emplace_back();
                question.words[0] = nonce_;
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
                if (receipt.words[0] != nonce_) {  // a late answer to an earlier question
                    check(MPI_Irecv(receipt.words.data(), 5, MPI_UINT64_T, receipt.peer, reply_tag, control_,
                                    &receipt.request),
                          "MPI_Irecv");
                    continue;
                }
                answers[static_cast<size_t>(receipt.peer)] =
                    PeerStatus{receipt.words[1], receipt.words[2], receipt.words[3] != 0, receipt.words[4]};
                said(receipt.peer, *answers[static_cast<size_t>(receipt.peer)]);
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

    int node_leader() const override { return node_leader_; }

    std::unique_ptr<Transport> split(int color, int key, Clock::time_point) override {
        MPI_Comm sub = MPI_COMM_NULL;
        check(MPI_Comm_split(comm_, color >= 0 ? color : MPI_UNDEFINED, key, &sub), "MPI_Comm_split");
        if (sub == MPI_COMM_NULL) return nullptr;
        try {
            return std::make_unique<MpiTransport>(sub, thread_level_);
        } catch (const Error&) {
            MPI_Comm_free(&sub);
            throw;
        }
    }

    void finalize(bool peers_present) override {
        stop_responder();
        std::lock_guard lock(control_mutex_);
        if (comm_ == MPI_COMM_NULL) return;
        if (!peers_present) {
            // A peer is gone or stuck: anything collective could wait for
            // ever, so MPI is left as it is and the process may exit.
            comm_ = control_ = MPI_COMM_NULL;
            return;
        }
        for (MPI_Request* receive : {&query_receive_, &abort_receive_, &ping_receive_, &pong_receive_}) {
            MPI_Cancel(receive);
            MPI_Wait(receive, MPI_STATUS_IGNORE);
        }
        for (auto* messages : {&replies_, &aborts_sent_})
            for (Message& message : *messages)
                if (message.request != MPI_REQUEST_NULL) MPI_Request_free(&message.request);
        user_ops_.reset();
        // A communicator with an operation a timeout abandoned is not freed:
        // freeing it could wait for that operation.
        if (abandoned_.empty()) check(MPI_Comm_free(&comm_), "MPI_Comm_free");
        check(MPI_Comm_free(&control_), "MPI_Comm_free");
        comm_ = control_ = MPI_COMM_NULL;
        if (owns_mpi_) check(MPI_Finalize(), "MPI_Finalize");
    }

private:
    struct Message {
        std::array<uint64_t, 6> words{};
        MPI_Request request = MPI_REQUEST_NULL;
        int peer = -1;
    };

    /// What both constructors do once comm_ and control_ exist: errors
    /// returned, rank, size and node, user operations, control receives.
    void set_up() {
        for (MPI_Comm comm : {comm_, control_})
            check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
        check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
        MPI_Comm node;
        check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
        MPI_Comm_rank(node, &local_rank_);
        MPI_Comm_size(node, &local_size_);
        // The node's local rank 0 is its smallest rank here (the key was the rank).
        MPI_Group node_group, group;
        MPI_Comm_group(node, &node_group);
        MPI_Comm_group(comm_, &group);
        const int first = 0;
        MPI_Group_translate_ranks(node_group, 1, &first, group, &node_leader_);
        MPI_Group_free(&node_group);
        MPI_Group_free(&group);
        MPI_Comm_free(&node);
        // Every rank's process, for finding dead peers on this host.
        constexpr int words = ProcessIdentity::words;
        const std::vector<uint64_t> mine = this_process().to_words();
        std::vector<uint64_t> all(words * static_cast<size_t>(size_));
        check(MPI_Allgather(mine.data(), words, MPI_UINT64_T, all.data(), words, MPI_UINT64_T, control_),
              "MPI_Allgather");
        processes_.resize(static_cast<size_t>(size_));
        for (size_t r = 0; r < processes_.size(); ++r)
            processes_[r] = ProcessIdentity::from_words(std::span(all).subspan(words * r, words));
        user_ops_ = std::make_unique<UserOps>();
        heard_.assign(static_cast<size_t>(size_), Clock::time_point::min());
        said_.assign(static_cast<size_t>(size_), std::nullopt);
        post_control_receives();
    }

    /// A tag for one recursive-doubling allreduce on comm_. Every rank starts
    /// libddp's operations in one order, so equal tags name the same one;
    /// MPI's smallest allowed tag range (32768) is far more than are in flight.
    int next_tag() { return static_cast<int>(tag_counter_.fetch_add(1) % 32768); }

    MPI_Op op_for(ddp_dtype dtype, ddp_op op) const {
        const MPI_Op user = user_ops_->get(dtype, op);
        return user != MPI_OP_NULL ? user : mpi_builtin_op(op);
    }

    /// Notes that a control message came from `peer` (control_mutex_ held).
    void heard(int peer) {
        if (peer >= 0 && peer < size_) heard_[static_cast<size_t>(peer)] = Clock::now();
    }

    /// Notes what `peer` said it was doing (control_mutex_ held).
    void said(int peer, const PeerStatus& status) {
        if (peer < 0 || peer >= size_) return;
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

    MPI_Comm comm_ = MPI_COMM_NULL;
    MPI_Comm control_ = MPI_COMM_NULL;
    std::unique_ptr<UserOps> user_ops_;
    std::atomic<uint64_t> tag_counter_{0};
    int thread_level_ = MPI_THREAD_SINGLE;
    bool owns_mpi_ = false;
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_leader_ = 0;

    // Control plane state, guarded by control_mutex_ (the responder thread
    // and the waiting loops both receive).
    std::mutex control_mutex_;
    std::function<PeerStatus()> status_;
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

std::unique_ptr<Transport> make_mpi_transport(int64_t mpi_comm_fortran) {
    return std::make_unique<MpiTransport>(mpi_comm_fortran);
}

bool mpi_launch_detected() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized || launched_by_mpi_launcher();
}

}  // namespace ddp
