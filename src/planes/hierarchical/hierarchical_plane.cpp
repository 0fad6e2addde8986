#include "planes/hierarchical/hierarchical_plane.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "planes/shm/shm_plane.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

/// The buffer goes piece by piece, pipelined: Open MPI's non-blocking
/// collectives recurse once per round they complete at once, and one 64 MiB
/// stage over TCP overflowed the stack (signal 11 in NBC_Progress); in
/// pieces, the node and the network stages of different pieces also overlap.
constexpr int64_t piece_bytes = int64_t{4} << 20;
/// Pieces in flight at once.
constexpr size_t window = 4;

/// Pieces that each go through the same stages in order, several pieces
/// at a time. Stage s of a piece starts only once stage s of the piece
/// before it has started, so every communicator (one per stage) sees its
/// operations in piece order on every rank, as MPI requires, and once it
/// has ended where the stage's plane runs one operation at a time
/// (HostPlane::overlaps_operations); all driven by the caller's test(), so
/// the call's deadline covers every piece.
class Pipeline final : public Pending {
public:
    struct Stage {
        std::function<std::unique_ptr<Pending>(size_t piece)> start;
        bool alongside;  ///< the stage of several pieces may be in flight at once
    };
    Pipeline(std::vector<Stage> stages, size_t pieces)
        : stages_(std::move(stages)), pieces_(pieces), started_(stages_.size(), 0), ended_(stages_.size(), 0) {}

    bool test() override {
        for (size_t piece = first_; piece < std::min(pieces_, first_ + window); ++piece) {
            Progress& p = progress(piece);
            while (true) {
                if (p.current && !p.current->test()) break;
                p.current.reset();
                if (std::exchange(p.running, false)) ++ended_[p.next_stage - 1];
                if (p.next_stage == stages_.size()) break;
                const Stage& stage = stages_[p.next_stage];
                if (started_[p.next_stage] != piece) break;  // the piece before has not started it yet
                if (!stage.alongside && ended_[p.next_stage] != piece) break;  // nor ended it
                p.current = stage.start(piece);
                p.running = true;
                ++started_[p.next_stage++];
            }
        }
        while (first_ < pieces_ && progress(first_).next_stage == stages_.size() && !progress(first_).current) {
            in_flight_.erase(in_flight_.begin());
            ++first_;
        }
        return first_ == pieces_;
    }

private:
    struct Progress {
        size_t next_stage = 0;
        std::unique_ptr<Pending> current;
        bool running = false;  ///< stage next_stage - 1 started and its end not yet counted
    };
    /// Piece `piece`'s progress (first_ <= piece < first_ + window).
    Progress& progress(size_t piece) {
        while (in_flight_.size() <= piece - first_) in_flight_.emplace_back();
        return in_flight_[piece - first_];
    }

    std::vector<Stage> stages_;
    size_t pieces_;
    std::vector<size_t> started_;  ///< per stage: how many pieces have started it
    std::vector<size_t> ended_;    ///< per stage: how many pieces have ended it
    std::vector<Progress> in_flight_;  ///< pieces first_, first_ + 1, ...
    size_t first_ = 0;
};

/// One node stage: its own node transport (so that its operations keep one
/// order on every rank), and the shared-memory plane over the same ranks
/// where the node has one.
struct NodeStage {
    std::unique_ptr<Transport> transport;
    std::unique_ptr<HostPlane> shm;
    HostPlane& plane() const { return shm ? *shm : *transport->host_planes().front(); }
};

class HierarchicalPlane final : public HostPlane {
public:
    /// `node_reduce` and `node_broadcast`: this rank's node, one per stage;
    /// `leaders`: the node leaders' transport on a node leader, else nullptr.
    HierarchicalPlane(NodeStage node_reduce, std::unique_ptr<Transport> leaders, NodeStage node_broadcast)
        : node_reduce_(std::move(node_reduce)), leaders_(std::move(leaders)),
          node_broadcast_(std::move(node_broadcast)) {}

    ~HierarchicalPlane() override {
        try {
            finalize(false);
        } catch (const Error&) {
            // Destructors must not throw; finalize() reports errors when called directly.
        }
    }

    /// Says which way this rank's node stages go (the timeline shows it).
    const char* name() const override { return node_reduce_.shm ? "hierarchical/shm" : "hierarchical/mpi"; }

    std::span<const Capability> capabilities() const override { return hierarchical_capabilities; }
    /// Two steps in flight, as before the mpi plane went one at a time: its
    /// node stages through shared memory move on their own; one at a time
    /// has not been measured here (that needs the simulated nodes).
    bool overlaps_operations() const override { return true; }

    /// Reduce onto the node's leader (its local rank 0), allreduce among
    /// the leaders, broadcast from the leader, piece by piece: every rank
    /// ends with the same bytes, as the leaders' allreduce gives them.
    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override {
        const auto element = static_cast<int64_t>(element_size(dtype));
        const int64_t per_piece = std::max<int64_t>(1, piece_bytes / element);
        auto* bytes = static_cast<std::byte*>(data);
        // Piece k: its start and its element count.
        auto piece = [bytes, element, per_piece, count](size_t k) {
            const int64_t first = static_cast<int64_t>(k) * per_piece;
            return std::pair<void*, int64_t>(bytes + first * element, std::min(per_piece, count - first));
        };
        std::vector<Pipeline::Stage> stages;
        HostPlane& reduce = node_reduce_.plane();
        stages.push_back({[&reduce, piece, dtype, op](size_t k) {
                              const auto [at, n] = piece(k);
                              return reduce.start_reduce(at, n, dtype, op, 0);
                          },
                          reduce.overlaps_operations()});
        if (leaders_) {
            HostPlane& leaders = *leaders_->host_planes().front();
            stages.push_back({[&leaders, piece, dtype, op](size_t k) {
                                  const auto [at, n] = piece(k);
                                  return leaders.start_allreduce(at, n, dtype, op);
                              },
                              leaders.overlaps_operations()});
        }
        HostPlane& broadcast = node_broadcast_.plane();
        stages.push_back({[&broadcast, piece, element](size_t k) {
                              const auto [at, n] = piece(k);
                              return broadcast.start_broadcast(at, n * element, 0);
                          },
                          broadcast.overlaps_operations()});
        return std::make_unique<Pipeline>(std::move(stages), static_cast<size_t>((count + per_piece - 1) / per_piece));
    }

    void finalize(bool peers_present) override {
        node_broadcast_.shm.reset();
        node_reduce_.shm.reset();
        for (auto* transport : {&node_broadcast_.transport, &leaders_, &node_reduce_.transport}) {
            if (*transport) (*transport)->finalize(peers_present);
            transport->reset();
        }
    }

private:
    NodeStage node_reduce_;
    std::unique_ptr<Transport> leaders_;
    NodeStage node_broadcast_;
};

/// Waits for `pending` until `deadline`; false when it did not finish.
bool finished_by(std::unique_ptr<Pending> pending, Clock::time_point deadline) {
    while (pending && !pending->test()) {
        if (Clock::now() > deadline) return false;
        std::this_thread::yield();
    }
    return true;
}

}  // namespace

std::unique_ptr<HostPlane> make_hierarchical_plane(Transport& transport, ShmRequest shm, Clock::time_point deadline) {
    ControlChannel& channel = transport.channel();
    if (channel.size() == 1) return nullptr;
    // Whether some rank is on another node than some other, and the most
    // ranks on one node: alike on every rank, so all decide the same.
    std::array<uint64_t, 2> words{channel.local_size() < channel.size() ? 1u : 0u,
                                  static_cast<uint64_t>(channel.local_size())};
    if (!finished_by(channel.start_max_u64(words), deadline))
        fail(DDP_ERR_TIMEOUT, "setting up the hierarchical plane: not every rank took part within the timeout");
    if (words[0] == 0 || words[1] < 2) return nullptr;
    // MPI's own split exchanges the colors: no table (the plane runs over MPI).
    NodeStage node_reduce{transport.split(channel.node_leader(), channel.rank(), {}, deadline), nullptr};
    std::unique_ptr<Transport> leaders =
        transport.split(channel.local_rank() == 0 ? 0 : -1, channel.rank(), {}, deadline);
    NodeStage node_broadcast{transport.split(channel.node_leader(), channel.rank(), {}, deadline), nullptr};
    // Each node's ranks decide together (make_shm_plane is collective over
    // the node transport's channel, and both answers are alike on its
    // ranks); nodes may differ, as their stages never meet.
    node_reduce.shm = make_shm_plane(node_reduce.transport->channel(), shm, deadline);
    node_broadcast.shm = make_shm_plane(node_broadcast.transport->channel(), shm, deadline);
    if (!node_reduce.shm || !node_broadcast.shm) {
        node_reduce.shm.reset();
        node_broadcast.shm.reset();
    }
    log_line(channel.rank(), channel.size(), DDP_LOG_DEBUG,
             std::string("the hierarchical plane's node stages go through ") +
                 (node_reduce.shm ? "shared memory"
                                  : "MPI (DDP_SHM=0, one rank on the node, or no shared-memory plane set up)"));
    return std::make_unique<HierarchicalPlane>(std::move(node_reduce), std::move(leaders), std::move(node_broadcast));
}

}  // namespace ddp
