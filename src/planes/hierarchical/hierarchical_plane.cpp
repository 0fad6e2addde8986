#include "planes/hierarchical/hierarchical_plane.hpp"

#include <array>
#include <functional>
#include <thread>
#include <vector>

#include "util/dtype.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

/// Stages run one after the other, each started once the one before it
/// has finished, all driven by the caller's test() (so the call's deadline
/// covers the whole chain).
class Chain final : public Pending {
public:
    using Stage = std::function<std::unique_ptr<Pending>()>;
    explicit Chain(std::vector<Stage> stages) : stages_(std::move(stages)) {}

    bool test() override {
        while (true) {
            if (current_ && !current_->test()) return false;
            current_.reset();
            if (next_ == stages_.size()) return true;
            current_ = stages_[next_++]();
        }
    }

private:
    std::vector<Stage> stages_;
    size_t next_ = 0;
    std::unique_ptr<Pending> current_;
};

class HierarchicalPlane final : public HostPlane {
public:
    /// `leaders`: the node leaders' transport on a node leader, else nullptr.
    HierarchicalPlane(std::unique_ptr<Transport> node, std::unique_ptr<Transport> leaders)
        : node_(std::move(node)), leaders_(std::move(leaders)) {}

    ~HierarchicalPlane() override {
        try {
            finalize(false);
        } catch (const Error&) {
            // Destructors must not throw; finalize() reports errors when called directly.
        }
    }

    const char* name() const override { return "hierarchical"; }

    bool runs(DataOp op, ddp_dtype, ddp_op, int64_t bytes) const override {
        return op == DataOp::allreduce && bytes >= hierarchical_min_bytes;
    }

    /// Reduce onto the node's leader (its local rank 0), allreduce among
    /// the leaders, broadcast from the leader: every rank ends with the same
    /// bytes, as the leaders' allreduce gives them.
    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override {
        HostPlane& node = *node_->host_planes().front();
        const int64_t bytes = count * static_cast<int64_t>(element_size(dtype));
        std::vector<Chain::Stage> stages;
        stages.emplace_back([&node, data, count, dtype, op] { return node.start_reduce(data, count, dtype, op, 0); });
        if (leaders_) {
            HostPlane& leaders = *leaders_->host_planes().front();
            stages.emplace_back(
                [&leaders, data, count, dtype, op] { return leaders.start_allreduce(data, count, dtype, op); });
        }
        stages.emplace_back([&node, data, bytes] { return node.start_broadcast(data, bytes, 0); });
        return std::make_unique<Chain>(std::move(stages));
    }

    void finalize(bool peers_present) override {
        if (leaders_) leaders_->finalize(peers_present);
        if (node_) node_->finalize(peers_present);
        leaders_.reset();
        node_.reset();
    }

private:
    std::unique_ptr<Transport> node_;
    std::unique_ptr<Transport> leaders_;
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

std::unique_ptr<HostPlane> make_hierarchical_plane(Transport& transport, Clock::time_point deadline) {
    ControlChannel& channel = transport.channel();
    if (channel.size() == 1 || env_string("DDP_HIERARCHICAL").value_or("1") == "0") return nullptr;
    // Whether some rank is on another node than some other, and the most
    // ranks on one node: alike on every rank, so all decide the same.
    std::array<uint64_t, 2> words{channel.local_size() < channel.size() ? 1u : 0u,
                                  static_cast<uint64_t>(channel.local_size())};
    if (!finished_by(channel.start_max_u64(words), deadline))
        fail(DDP_ERR_TIMEOUT, "setting up the hierarchical plane: not every rank took part within the timeout");
    if (words[0] == 0 || words[1] < 2) return nullptr;
    std::unique_ptr<Transport> node = transport.split(channel.node_leader(), channel.rank(), deadline);
    std::unique_ptr<Transport> leaders = transport.split(channel.local_rank() == 0 ? 0 : -1, channel.rank(), deadline);
    return std::make_unique<HierarchicalPlane>(std::move(node), std::move(leaders));
}

}  // namespace ddp
