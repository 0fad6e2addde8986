// The one-process transport: rank 0 of 1, where every collective's result is
// the input itself and there is no peer to wait for.
#include <cstring>

#include "planes/self/capabilities.hpp"
#include "planes/transport.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

class SelfTransport final : public Transport, public ControlChannel, public HostPlane {
public:
    const char* name() const override { return "self"; }
    ControlChannel& channel() override { return *this; }
    std::vector<HostPlane*> host_planes() override { return {this}; }
    std::span<const Capability> capabilities() const override { return self_capabilities; }
    int rank() const override { return 0; }
    int size() const override { return 1; }
    int local_rank() const override { return 0; }
    int local_size() const override { return 1; }
    bool allows_background_thread() const override { return true; }
    bool allows_concurrent_calls() const override { return true; }

    std::unique_ptr<Pending> start_allreduce(void*, int64_t, ddp_dtype, ddp_op) override { return nullptr; }
    std::unique_ptr<Pending> start_reduce(void*, int64_t, ddp_dtype, ddp_op, int) override { return nullptr; }
    std::unique_ptr<Pending> start_broadcast(void*, int64_t, int) override { return nullptr; }
    // With one rank each of these is a copy of the input into the output.
    std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) override {
        if (send != recv) std::memcpy(recv, send, static_cast<size_t>(count) * element_size(dtype));
        return nullptr;
    }
    std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                  ddp_op) override {
        std::memcpy(recv, send, static_cast<size_t>(count) * element_size(dtype));
        return nullptr;
    }
    std::unique_ptr<Pending> start_exchange(Exchange exchange) override {
        const Exchange* only = &exchange;
        for (const Meeting& meeting : meetings_of(std::span(&only, 1), 0, 0))
            std::memcpy(meeting.receive->data, meeting.send->data, meeting.receive->bytes);
        return nullptr;
    }

    std::unique_ptr<Pending> start_max_u64(std::span<uint64_t>) override { return nullptr; }
    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t>, void*, int64_t, ddp_dtype,
                                                    ddp_op) override {
        return nullptr;
    }
    std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t> words,
                                                 std::vector<std::vector<uint64_t>>& by_rank) override {
        by_rank = {std::vector<uint64_t>(words.begin(), words.end())};
        return nullptr;
    }
    void abandon(std::unique_ptr<Pending>) override {}

    void start_control(const StatusSource&) override {}
    void poll_control() override {}
    std::optional<AbortNotice> abort_notice() override { return std::nullopt; }
    void send_abort(const AbortNotice&) override {}
    std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point, int) override { return {std::nullopt}; }
    std::optional<Clock::time_point> last_heard_from(int) override { return std::nullopt; }
    std::optional<HeardStatus> last_status(int) override { return std::nullopt; }
    void ping(std::span<const int>) override {}

    bool answers_in_background() const override { return true; }
    std::unique_ptr<Pending> start_finalize_barrier() override { return nullptr; }
    void finalize(bool) override {}

    int node_leader() const override { return 0; }
    std::unique_ptr<Transport> split(int color, int, std::span<const std::pair<int, int>>, Clock::time_point) override {
        if (color < 0) return nullptr;
        return std::make_unique<SelfTransport>();
    }
};

}  // namespace

std::unique_ptr<Transport> make_self_transport() { return std::make_unique<SelfTransport>(); }

}  // namespace ddp
