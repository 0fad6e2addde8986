// How the plane works. The segment holds, per rank, three progress flags
// (the last step it posted its input for, reduced its part of, and finished
// reading) and two buffers of one cache-sized chunk each. Every operation
// is cut into steps of one chunk; steps are numbered across the plane's
// life in the order operations start, which is the same on every rank, so
// a rank still finishing an earlier call never meets a flag it could take
// for this one (flags only grow). For an allreduce, step s: each rank
// copies its chunk into its buffer s % 2 (once every rank has finished
// reading step s - 2 from it) and posts s; reduces its 1/size part of the
// chunk from every rank's buffer, in rank order (so every rank's result
// has the same bits), into its own buffer and says so; then copies the
// other ranks' parts out. Two buffers let a rank copy the next chunk in
// while its peers still read the last one. Ranks 0 and 1 read their own
// part in place and do not copy it in (reads_own_in_place).
//
// Where the ranks' cores sit far apart (another CCD or socket), a line read
// from a peer's cache crosses the slow link between them: there a rank
// writes its buffer with streaming stores, so that peers read it from
// memory (stream_copy.hpp). Large operations measure that distance now and
// then before their first step (distance_probe.hpp).
//
// Nothing blocks: test() goes as far as the flags allow and returns, so the
// control plane holds the operation to the call's deadline and a dead peer
// ends in its timeout.
#include "planes/shm/shm_plane.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "planes/shm/capabilities.hpp"
#include "planes/shm/combine.hpp"
#include "planes/shm/distance_probe.hpp"
#include "planes/shm/pieces.hpp"
#include "planes/shm/progress_flags.hpp"
#include "planes/shm/segment.hpp"
#include "planes/shm/start_order.hpp"
#include "planes/shm/shm_agreement.hpp"
#include "planes/shm/stream_copy.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

using shm::Segment;

/// One rank's buffer for one step: this machine's L2 per core, so that a
/// step's inputs and results stay in L2 and the shared L3. Measured against
/// 256 KiB (bench/allreduce_bench sizes, 2 ranks, 1-256 MiB, 3 runs each):
/// fewer steps, fewer waits for a peer, faster in most cells.
constexpr size_t chunk_bytes = 1024 * 1024;
constexpr size_t line = shm::cache_line;
constexpr uint64_t layout_magic = 0x64647073686d3034;  // "ddpshm04"

/// Operations of at least this many bytes measure the distance now and then
/// and stream their copies when far; smaller ones stay in the caches.
constexpr int64_t large_bytes = 256 * 1024;
/// A probe (a few cache-line passes, 1-3 µs) before the first large
/// operation and then before the next one once this many have gone by, or
/// this many bytes (a large operation takes 30 µs or more; 32 MiB, 3-10 ms).
/// A host moves its vCPUs every few seconds: one probe per 16 calls of
/// 256 MiB left a whole benchmark cell in the wrong mode.
constexpr uint64_t probe_every_operations = 16;
constexpr uint64_t probe_every_bytes = uint64_t{32} << 20;
constexpr int probe_passes = 5;

enum Flag : size_t { posted = 0, reduced = 1, consumed = 2, probe = 3, flags_per_rank = 4 };

/// The segment: the layout's words, the doorbell, every rank's flags, every
/// rank's two buffers, then agreement's area.
constexpr size_t doorbell_at = line;
constexpr size_t flags_at = 2 * line;
size_t plane_bytes(int ranks) {
    return flags_at + static_cast<size_t>(ranks) * (flags_per_rank * line + 2 * chunk_bytes);
}
size_t segment_bytes(int ranks) { return plane_bytes(ranks) + shm::agreement_area_bytes(ranks); }

class Operation;

/// The mapped segment and the operations started on it; shared by
/// the plane and its operations, so an operation a timeout abandoned keeps
/// the mapping alive until it goes.
class State {
public:
    State(std::shared_ptr<const Segment> segment, int rank, int size, std::optional<bool> stream)
        : segment_(std::move(segment)),
          flags_(segment_->data() + flags_at, flags_per_rank * line, shm::Doorbell(segment_->data() + doorbell_at), rank,
                 size),
          rank_(rank), size_(size), stream_(stream), scratch_(chunk_bytes) {}

    int rank() const { return rank_; }
    int size() const { return size_; }
    uint64_t flag(int rank, Flag which) const { return flags_.get(rank, which); }
    void set(Flag which, uint64_t step) {
        flags_.set(which, step);
        if (which == consumed) steps_done_.fetch_add(1, std::memory_order_relaxed);
    }
    /// How many steps this rank has finished, each only once its peers
    /// posted theirs: Pending::progress of its operations (its own posting
    /// says nothing of whether its peers are running).
    uint64_t steps_done() const { return steps_done_.load(std::memory_order_relaxed); }
    bool sleep_unless(const std::function<bool()>& moved, Clock::time_point until) {
        return flags_.sleep_unless(moved, until);
    }
    bool all_reached(Flag which, uint64_t step) const { return flags_.all_reached(which, step); }
    std::byte* buffer(int rank, uint64_t step) const {
        return segment_->data() + flags_at + static_cast<size_t>(size_) * flags_per_rank * line +
               (static_cast<size_t>(rank) * 2 + step % 2) * chunk_bytes;
    }
    std::byte* scratch() { return scratch_.data(); }

    /// A probe for the next large operation when one is due; the same on
    /// every rank, as operations (and their sizes) start in the same order on
    /// all. It runs whatever DDP_SHM_STREAM says: that is each rank's own
    /// environment, and a rank that skipped a probe its peers run would
    /// leave them waiting for its token.
    std::optional<shm::DistanceProbe> next_large_operation_probe(uint64_t bytes) {
        const bool due = probes_ == 0 || operations_since_probe_ >= probe_every_operations ||
                         bytes_since_probe_ >= probe_every_bytes;
        ++operations_since_probe_;
        bytes_since_probe_ += bytes;
        if (!due) return std::nullopt;
        operations_since_probe_ = 1;
        bytes_since_probe_ = bytes;
        const uint64_t first_token = probes_++ * probe_passes + 1;
        return std::optional<shm::DistanceProbe>(std::in_place, flags_, probe, rank_, size_, first_token, probe_passes);
    }
    void measured(double hop_ns) {
        const bool far = hop_ns > shm::DistanceProbe::far_hop_ns;
        if (far != far_)
            log_line(rank_, size_, DDP_LOG_DEBUG,
                     std::string("the shared-memory plane ") + (far ? "streams" : "no longer streams") +
                         " its copies past the caches: a cache line took " + std::to_string(std::lround(hop_ns)) +
                         " ns from one rank's core to the next");
        far_ = far;
    }
    /// Whether large operations stream their copies: as DDP_SHM_STREAM
    /// says, else whether the last probe found the peers far (none yet: no).
    bool streams() const { return stream_.value_or(far_); }

    shm::StartOrder<Operation> started;
    uint64_t next_step = 1;  ///< the number the next operation's first step gets (under started's lock)

private:
    std::shared_ptr<const Segment> segment_;
    shm::ProgressFlags flags_;
    std::atomic<uint64_t> steps_done_{0};  // counted under started's lock, read by any waiter
    int rank_, size_;
    std::optional<bool> stream_;
    uint64_t probes_ = 0, operations_since_probe_ = 0, bytes_since_probe_ = 0;  ///< under started's lock
    bool far_ = false;
    std::vector<std::byte> scratch_;  ///< a reduce's part on a rank that keeps no result
};

/// [first, end) of `part` when `n` elements are cut into `parts`.
struct Range {
    int64_t first, end;
    int64_t length() const { return end - first; }
};
Range part_of(int64_t n, int parts, int part) { return {n * part / parts, n * (part + 1) / parts}; }

/// An exchange's sends to each rank, and its receives from each, as one
/// stream per rank: the k-th send to a rank meets that rank's k-th receive,
/// so the two streams between a pair hold the same bytes in the same order.
struct Streams {
    Streams() = default;
    Streams(const Exchange& exchange, int ranks) : to(static_cast<size_t>(ranks)), from(static_cast<size_t>(ranks)) {
        // Pieces only read what they gather from.
        for (const Send& send : exchange.sends)
            to[static_cast<size_t>(send.peer)].add({const_cast<std::byte*>(send.data), send.bytes});
        for (const Receive& receive : exchange.receives)
            from[static_cast<size_t>(receive.peer)].add({receive.data, receive.bytes});
    }
    std::vector<shm::Pieces> to, from;
};

/// One operation through the segment, as a sequence of chunk-sized steps.
class Operation final : public Pending {
public:
    struct Args {
        DataOp kind;
        std::byte* data;        ///< allreduce, reduce, broadcast: in place; the others: recv
        const std::byte* send;  ///< allgather, reduce_scatter
        int64_t count;          ///< elements (broadcast: bytes); allgather, reduce_scatter: per rank
        ddp_dtype dtype;
        ddp_op op;
        int root;
        std::span<const Piece> pieces = {};  ///< allreduce: data is null and the elements lie here
        const Exchange* exchange = nullptr;  ///< exchange (count: its `largest`)
    };

    Operation(std::shared_ptr<State> state, const Args& args)
        : state_(std::move(state)), args_(without_pieces(args)), pieces_(args.pieces),
          element_(args.kind == DataOp::broadcast || args.kind == DataOp::exchange
                       ? 1
                       : static_cast<int64_t>(element_size(args.dtype))) {
        const auto per_chunk = static_cast<int64_t>(chunk_bytes) / element_;
        // reduce_scatter and exchange post a piece of every rank's block (stream) each step.
        const bool by_block = args.kind == DataOp::reduce_scatter || args.kind == DataOp::exchange;
        per_step_ = by_block ? std::max<int64_t>(1, per_chunk / state_->size()) : per_chunk;
        if (args.exchange != nullptr) streams_ = Streams(*args.exchange, state_->size());
        steps_ = (args.count + per_step_ - 1) / per_step_;
        done_ = steps_ == 0;
    }
    ~Operation() override { state_->started.remove(this); }
    /// `args` with no pieces or exchange: the lists are the caller's and go
    /// when start returns (pieces_ and streams_ keep copies).
    static Args without_pieces(Args args) {
        args.pieces = {};
        args.exchange = nullptr;
        return args;
    }
    Operation(const Operation&) = delete;
    Operation& operator=(const Operation&) = delete;

    bool done() const { return done_; }
    bool test() override { return state_->started.drive(*this); }
    bool sleep(Clock::time_point until) override {
        return state_->sleep_unless([this] { return test(); }, until);
    }
    uint64_t progress() const override { return state_->steps_done(); }

private:
    friend class shm::StartOrder<Operation>;

    /// Goes as far as the peers' flags allow; true once every step is done.
    bool advance() {
        State& state = *state_;
        if (first_step_ == 0) {
            first_step_ = state.next_step;
            state.next_step += static_cast<uint64_t>(steps_);
            if (large()) probe_ = state.next_large_operation_probe(bytes(args_.count));
        }
        if (probe_) {
            if (!probe_->advance()) return false;
            state.measured(probe_->hop_ns());
            probe_.reset();
        }
        while (step_ < steps_) {
            const uint64_t s = first_step_ + static_cast<uint64_t>(step_);
            if (phase_ == 0) {
                if (writes_buffer() && !state.all_reached(consumed, s < 2 ? 0 : s - 2)) return false;
                copy_in(s);
                state.set(posted, s);
                phase_ = 1;
            }
            if (phase_ == 1) {
                if (reduces(args_.kind)) {
                    if (!state.all_reached(posted, s)) return false;
                    reduce_part(s);
                }
                state.set(reduced, s);
                phase_ = 2;
            }
            if (!ready_to_copy_out(s)) return false;
            copy_out(s);
            state.set(consumed, s);
            phase_ = 0;
            ++step_;
        }
        done_ = true;
        return true;
    }

    int me() const { return state_->rank(); }
    int64_t offset() const { return step_ * per_step_; }
    int64_t length() const { return std::min(per_step_, args_.count - offset()); }
    size_t bytes(int64_t elements) const { return static_cast<size_t>(elements * element_); }
    std::byte* at(std::byte* base, int64_t element) const { return base + element * element_; }
    const std::byte* at(const std::byte* base, int64_t element) const { return base + element * element_; }
    bool keeps_result() const { return args_.kind != DataOp::reduce || me() == args_.root; }
    bool large() const { return bytes(args_.count) >= large_bytes; }

    /// Into this rank's buffer, from where peers read it: streamed past this
    /// core's caches when they sit far (read at the head of the file).
    void to_buffer(std::byte* dst, const std::byte* src, size_t n) const {
        if (large() && state_->streams())
            shm::stream_copy(dst, src, n);
        else
            std::memcpy(dst, src, n);
    }

    bool writes_buffer() const { return args_.kind != DataOp::broadcast || me() == args_.root; }
    bool gathered() const { return !pieces_.empty(); }

    void copy_in(uint64_t s) {
        std::byte* mine = state_->buffer(me(), s);
        const int64_t n = length();
        switch (args_.kind) {
        case DataOp::allreduce:
            if (gathered()) {
                pieces_.gather(mine, bytes(offset()), bytes(n),
                               [this](std::byte* to, const std::byte* from, size_t b) { to_buffer(to, from, b); });
                break;
            }
            [[fallthrough]];
        case DataOp::reduce: {
            // This rank's own part stays out where it reads it in place (reads_own_in_place).
            const Range own = reads_own_in_place() ? part_of(n, state_->size(), me()) : Range{0, 0};
            to_buffer(mine, at(args_.data, offset()), bytes(own.first));
            to_buffer(at(mine, own.end), at(args_.data, offset() + own.end), bytes(n - own.end));
            break;
        }
        case DataOp::broadcast:
            if (me() == args_.root) to_buffer(mine, at(args_.data, offset()), bytes(n));
            break;
        case DataOp::allgather: to_buffer(mine, at(args_.send, offset()), bytes(n)); break;
        case DataOp::reduce_scatter:
            // Piece `step` of every rank's block, block after block.
            for (int block = 0; block < state_->size(); ++block)
                to_buffer(at(mine, block * n), at(args_.send, block * args_.count + offset()), bytes(n));
            break;
        case DataOp::exchange:
            // Piece `step` of this rank's stream to each other rank, into that
            // rank's slot (its stream to itself goes straight across: copy_out).
            for (int rank = 0; rank < state_->size(); ++rank)
                if (rank != me())
                    streams_.to[static_cast<size_t>(rank)].gather(
                        at(mine, rank * per_step_), offset(), per_step_,
                        [this](std::byte* to, const std::byte* from, size_t b) { to_buffer(to, from, b); });
            break;
        }
    }

    /// Whether this rank reduces its own part of an allreduce or reduce
    /// from its tensor rather than from its buffer, sparing the copy of that
    /// part into the segment (no peer reads it). Only the first two ranks
    /// can: a later rank's part of an in-place result overwrites its input
    /// before the rank order reaches it.
    bool reads_own_in_place() const {
        return (args_.kind == DataOp::allreduce || args_.kind == DataOp::reduce) && !gathered() && me() < 2;
    }

    /// Rank `rank`'s input of step s, at its element `first`.
    const std::byte* input(int rank, uint64_t s, int64_t first) const {
        if (rank == me() && reads_own_in_place()) return at(args_.data, offset() + first);
        return at(state_->buffer(rank, s), first);
    }

    /// Every rank's elements at `first`..+n combined in rank order into `target`.
    void combine_all(std::byte* target, int64_t first, int64_t n, uint64_t s) const {
        shm::combine(target, input(0, s, first), input(1, s, first), n, args_.dtype, args_.op);
        for (int rank = 2; rank < state_->size(); ++rank)
            shm::combine(target, target, input(rank, s, first), n, args_.dtype, args_.op);
    }

    void reduce_part(uint64_t s) {
        const int64_t n = length();
        if (args_.kind == DataOp::reduce_scatter) {
            combine_all(at(args_.data, offset()), me() * n, n, s);
            return;
        }
        const Range part = part_of(n, state_->size(), me());
        if (part.length() == 0) return;
        // The result goes to this rank's own memory first (its buffer is an
        // input still), then into its buffer for the peers.
        std::byte* target =
            keeps_result() && !gathered() ? at(args_.data, offset() + part.first) : state_->scratch();
        combine_all(target, part.first, part.length(), s);
        if (gathered()) pieces_.scatter(bytes(offset() + part.first), target, bytes(part.length()));
        if (args_.kind == DataOp::allreduce || me() != args_.root)
            to_buffer(at(state_->buffer(me(), s), part.first), target, bytes(part.length()));
    }

    bool ready_to_copy_out(uint64_t s) const {
        switch (args_.kind) {
        case DataOp::allreduce: return state_->all_reached(reduced, s);
        case DataOp::reduce: return me() != args_.root || state_->all_reached(reduced, s);
        case DataOp::broadcast: return me() == args_.root || state_->flag(args_.root, posted) >= s;
        case DataOp::allgather:
        case DataOp::exchange: return state_->all_reached(posted, s);
        case DataOp::reduce_scatter: return true;
        }
        return true;
    }

    void copy_out(uint64_t s) {
        const int64_t n = length();
        switch (args_.kind) {
        case DataOp::allreduce:
        case DataOp::reduce:
            if (!keeps_result()) break;
            for (int rank = 0; rank < state_->size(); ++rank) {
                const Range part = part_of(n, state_->size(), rank);
                if (rank == me()) continue;
                const std::byte* from = at(state_->buffer(rank, s), part.first);
                if (gathered())
                    pieces_.scatter(bytes(offset() + part.first), from, bytes(part.length()));
                else
                    std::memcpy(at(args_.data, offset() + part.first), from, bytes(part.length()));
            }
            break;
        case DataOp::broadcast:
            if (me() != args_.root) std::memcpy(at(args_.data, offset()), state_->buffer(args_.root, s), bytes(n));
            break;
        case DataOp::allgather:
            for (int rank = 0; rank < state_->size(); ++rank) {
                std::byte* block = at(args_.data, rank * args_.count + offset());
                const std::byte* from = rank == me() ? at(args_.send, offset()) : state_->buffer(rank, s);
                if (block != from) std::memcpy(block, from, bytes(n));
            }
            break;
        case DataOp::reduce_scatter: break;
        case DataOp::exchange:
            // Piece `step` of each rank's stream to this one, from this rank's slot of its buffer.
            for (int rank = 0; rank < state_->size(); ++rank) {
                const shm::Pieces& into = streams_.from[static_cast<size_t>(rank)];
                if (rank == me())
                    into.copy_from(streams_.to[static_cast<size_t>(rank)], offset(), per_step_);
                else
                    into.scatter(offset(), at(state_->buffer(rank, s), me() * per_step_), per_step_);
            }
            break;
        }
    }

    std::shared_ptr<State> state_;
    const Args args_;
    const shm::Pieces pieces_;  ///< args_.pieces, kept: the caller's list may go first
    Streams streams_;           ///< an exchange's sends and receives, by rank
    const int64_t element_;
    int64_t per_step_ = 1, steps_ = 0;
    uint64_t first_step_ = 0;  ///< 0: not begun
    std::optional<shm::DistanceProbe> probe_;  ///< before the first step, when this operation measures
    int64_t step_ = 0;         ///< the step in progress, 0-based
    int phase_ = 0;            ///< 0: copy in, 1: reduce, 2: copy out
    bool done_ = false;
};

class ShmPlane final : public HostPlane {
public:
    ShmPlane(std::shared_ptr<State> state, std::unique_ptr<AgreementRoute> agreement)
        : state_(std::move(state)), agreement_(std::move(agreement)) {}

    const char* name() const override { return "shm"; }
    AgreementRoute* agreement_route() override { return agreement_.get(); }

    std::span<const Capability> capabilities() const override { return shm_capabilities; }

    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override {
        return start({DataOp::allreduce, static_cast<std::byte*>(data), nullptr, count, dtype, op, 0});
    }
    bool gathers_pieces() const override { return true; }
    // Every rank copies its part as soon as it gets there; with two steps in
    // flight, 3 ranks' 2500 x 256 floats in 1 MiB buckets took 0.69-0.73x the
    // time of one step at a time (bench/results/cpu-2026-11-29b).
    bool overlaps_operations() const override { return true; }
    std::unique_ptr<Pending> start_allreduce_pieces(std::span<const Piece> pieces, int64_t count, ddp_dtype dtype,
                                                    ddp_op op) override {
        return start({DataOp::allreduce, nullptr, nullptr, count, dtype, op, 0, pieces});
    }
    std::unique_ptr<Pending> start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) override {
        return start({DataOp::reduce, static_cast<std::byte*>(data), nullptr, count, dtype, op, root});
    }
    std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) override {
        return start({DataOp::broadcast, static_cast<std::byte*>(data), nullptr, bytes, DDP_DTYPE_U8, DDP_OP_SUM, root});
    }
    std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) override {
        return start({DataOp::allgather, static_cast<std::byte*>(recv), static_cast<const std::byte*>(send), count,
                      dtype, DDP_OP_SUM, 0});
    }
    std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                  ddp_op op) override {
        return start({DataOp::reduce_scatter, static_cast<std::byte*>(recv), static_cast<const std::byte*>(send),
                      count, dtype, op, 0});
    }
    std::unique_ptr<Pending> start_exchange(Exchange exchange) override {
        return start({DataOp::exchange, nullptr, nullptr, static_cast<int64_t>(exchange.largest), DDP_DTYPE_U8,
                      DDP_OP_SUM, 0, {}, &exchange});
    }

private:
    std::unique_ptr<Pending> start(const Operation::Args& args) {
        auto operation = std::make_unique<Operation>(state_, args);
        if (operation->done()) return nullptr;
        state_->started.push(operation.get());
        return operation;
    }

    std::shared_ptr<State> state_;
    std::unique_ptr<AgreementRoute> agreement_;
};

/// Every rank's `words`, waited for until `deadline`.
std::vector<std::vector<uint64_t>> exchange(ControlChannel& channel, std::vector<uint64_t> words,
                                            Clock::time_point deadline) {
    auto by_rank = std::make_shared<std::vector<std::vector<uint64_t>>>();
    std::unique_ptr<Pending> pending = channel.start_allgather_u64(words, *by_rank);
    while (pending && !pending->test()) {
        if (Clock::now() > deadline) {
            channel.abandon(std::move(pending));
            fail(DDP_ERR_TIMEOUT, "setting up the shared-memory plane: not every rank of the node took part "
                                  "within the timeout");
        }
        std::this_thread::yield();
    }
    return *by_rank;
}

std::string segment_name(uint64_t creator_pid, uint64_t nonce) {
    return "/ddp-" + std::to_string(creator_pid) + "-" + std::to_string(nonce);
}

}  // namespace

std::unique_ptr<HostPlane> make_shm_plane(ControlChannel& channel, ShmRequest request, Clock::time_point deadline) {
    const int rank = channel.rank(), size = channel.size();
    if (size < 2 || channel.local_size() != size) return nullptr;
    const size_t bytes = segment_bytes(size);
    const std::vector<uint64_t> layout{layout_magic, static_cast<uint64_t>(size), chunk_bytes};
    std::unique_ptr<Segment> segment;
    // On even where ranks outnumber CPUs: with waits that sleep, 3 and 4
    // ranks on 2 cores measured faster than through MPI (docs/shm.md).
    const bool enabled = request.on.value_or(true);
    std::string name, trouble = enabled ? "" : "DDP_SHM=0 here";
    // Round 1: rank 0 creates the segment under a name no other job uses
    // and tells it; every rank says whether it takes part.
    uint64_t nonce = 0;
    if (rank == 0 && enabled) {
        std::random_device random;
        nonce = (uint64_t{random()} << 32) | random();
        name = segment_name(static_cast<uint64_t>(::getpid()), nonce);
        try {
            segment = Segment::create(name, bytes);
            std::memcpy(segment->data(), layout.data(), layout.size() * sizeof(uint64_t));
        } catch (const Error& error) {
            trouble = error.what();
        }
    }
    const uint64_t joins = rank == 0 ? uint64_t{segment != nullptr} : uint64_t{enabled};
    const auto round1 = exchange(channel, {joins, static_cast<uint64_t>(::getpid()), nonce}, deadline);
    const bool all_join = std::all_of(round1.begin(), round1.end(), [](const auto& w) { return w.at(0) == 1; });
    if (all_join && rank != 0) {
        name = segment_name(round1[0].at(1), round1[0].at(2));
        try {
            segment = Segment::open(name, bytes);
            if (std::memcmp(segment->data(), layout.data(), layout.size() * sizeof(uint64_t)) != 0)
                fail(DDP_ERR_INTERNAL, "shared memory " + name + " has another layout (another libddp version?)");
        } catch (const Error& error) {
            segment.reset();
            trouble = error.what();
        }
    }
    // Round 2: whether every rank has it mapped. Then the name goes at once:
    // the mappings stay, and nothing is left in /dev/shm however the job ends.
    const auto round2 = exchange(channel, {uint64_t{segment != nullptr}}, deadline);
    if (!name.empty()) shm::unlink_segment(name);
    const bool all_mapped = all_join && std::all_of(round2.begin(), round2.end(), [](const auto& w) { return w.at(0) == 1; });
    if (!all_mapped) {
        log_line(rank, size, DDP_LOG_DEBUG,
                 "the shared-memory plane is off for this communicator: " +
                     (trouble.empty() ? std::string("a peer could not set it up or has DDP_SHM=0") : trouble));
        return nullptr;
    }
    log_line(rank, size, DDP_LOG_DEBUG,
             "the shared-memory plane is on for this communicator (" + std::to_string(size) + " ranks, " +
                 std::to_string(bytes) + " bytes of shared memory)");
    std::shared_ptr<const Segment> shared(std::move(segment));
    auto agreement =
        shm::make_shm_agreement(shared, plane_bytes(size), shm::Doorbell(shared->data() + doorbell_at), rank, size);
    return std::make_unique<ShmPlane>(std::make_shared<State>(std::move(shared), rank, size, request.stream),
                                      std::move(agreement));
}

}  // namespace ddp
