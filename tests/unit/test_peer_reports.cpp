// How a timed-out call describes a peer that did not answer its question:
// dead (nothing came from it during the call) or slow (a message of its own
// came during the call, so it lives; its answer is only late, as under
// packet loss). The network's part is played by a two-rank control channel whose
// peer never answers in time and whose operations never finish; the
// control plane deciding what to say is libddp's own.
#include <gtest/gtest.h>

#include <string>

#include "control/channel.hpp"
#include "control/control_plane.hpp"
#include "util/error.hpp"

namespace ddp {
namespace {

class NeverFinishes final : public Pending {
public:
    bool test() override { return false; }
};

/// Rank 0 of two; rank 1 answers no question within the deadline and was
/// last heard from at `heard` (empty: never). With `identities`, the ranks'
/// processes are known; with `answers_heartbeats`, rank 1 answers every
/// heartbeat at once.
class SilentPeerChannel final : public ControlChannel {
public:
    std::optional<Clock::time_point> heard;
    std::vector<ProcessIdentity> identities;
    bool answers_heartbeats = false;
    int heartbeats = 0;

    const char* name() const override { return "silent peer"; }
    int rank() const override { return 0; }
    int size() const override { return 2; }
    int local_rank() const override { return 0; }
    int local_size() const override { return 2; }
    bool allows_background_thread() const override { return true; }
    bool allows_concurrent_calls() const override { return true; }
    std::unique_ptr<Pending> start_max_u64(std::span<uint64_t>) override { return never(); }
    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t>, void*, int64_t, ddp_dtype,
                                                    ddp_op) override {
        return never();
    }
    std::unique_ptr<Pending> start_allgather_u64(std::span<const uint64_t>,
                                                 std::vector<std::vector<uint64_t>>&) override {
        return never();
    }
    void abandon(std::unique_ptr<Pending>) override {}
    void start_control(const StatusSource&) override {}
    void poll_control() override {}
    std::optional<AbortNotice> abort_notice() override { return std::nullopt; }
    void send_abort(const AbortNotice&) override {}
    std::vector<std::optional<PeerStatus>> ask_peers(Clock::time_point deadline, int) override {
        while (Clock::now() < deadline) {
        }
        return {std::nullopt, std::nullopt};
    }
    std::optional<Clock::time_point> last_heard_from(int peer) override {
        return peer == 1 ? heard : std::nullopt;
    }
    std::optional<HeardStatus> last_status(int) override { return std::nullopt; }
    void ping(std::span<const int> peers) override {
        heartbeats += static_cast<int>(peers.size());
        if (answers_heartbeats) heard = Clock::now();
    }
    std::vector<ProcessIdentity> processes() const override { return identities; }
    bool answers_in_background() const override { return true; }
    std::unique_ptr<Pending> start_finalize_barrier() override { return never(); }
    int node_leader() const override { return 0; }

private:
    static std::unique_ptr<Pending> never() { return std::make_unique<NeverFinishes>(); }
};

/// The message of a barrier that times out after 0.2 s; `heard_during_call`
/// says when rank 1 was last heard from: during the call, before it, or never.
std::string timeout_message(SilentPeerChannel& backend, std::optional<bool> heard_during_call) {
    ControlPlane control(backend, 0.2, 100, 0);
    if (heard_during_call && !*heard_during_call) backend.heard = Clock::now();
    CallContext call = control.begin(CollectiveKind::barrier, 0);
    if (heard_during_call && *heard_during_call) backend.heard = Clock::now();
    try {
        control.wait(call, backend.start_finalize_barrier(), WaitStyle::for_peers);
    } catch (const Error& error) {
        EXPECT_EQ(error.status(), DDP_ERR_TIMEOUT);
        control.end();
        return error.what();
    }
    ADD_FAILURE() << "the barrier did not time out";
    return "";
}

TEST(PeerReports, APeerHeardFromDuringTheCallIsSlowNotDead) {
    SilentPeerChannel backend;
    const std::string message = timeout_message(backend, true);
    EXPECT_NE(message.find("rank 1 is slow, not dead: it did not answer within"), std::string::npos) << message;
    EXPECT_NE(message.find("a lossy or congested network"), std::string::npos) << message;
    EXPECT_EQ(message.find("did not answer (dead"), std::string::npos) << message;
}

TEST(PeerReports, APeerSilentSinceTheCallStartedDidNotAnswer) {
    for (const std::optional<bool> heard : {std::optional<bool>(false), std::optional<bool>()}) {
        SilentPeerChannel backend;
        const std::string message = timeout_message(backend, heard);
        EXPECT_NE(message.find("rank 1 did not answer (dead, hung"), std::string::npos) << message;
        EXPECT_EQ(message.find("slow"), std::string::npos) << message;
    }
}

/// The message of a barrier on rank 0 whose peer, rank 1, runs on another
/// host (seen only through heartbeats), with a 0.5 s bound for silence and
/// the timeout `timeout_s`; `seconds` gets how long the call took.
std::string message_about_a_peer_away(SilentPeerChannel& backend, double timeout_s, double& seconds) {
    backend.identities = {ProcessIdentity{1, 1, 1, "near"}, ProcessIdentity{77, 1, 2, "far"}};
    ControlPlane control(backend, timeout_s, 100, 0, nullptr, {}, 0.5);
    CallContext call = control.begin(CollectiveKind::barrier, 0);
    const auto started = Clock::now();
    try {
        control.wait(call, backend.start_finalize_barrier(), WaitStyle::for_peers);
    } catch (const Error& error) {
        seconds = std::chrono::duration<double>(Clock::now() - started).count();
        EXPECT_EQ(error.status(), DDP_ERR_TIMEOUT);
        control.end();
        return error.what();
    }
    ADD_FAILURE() << "the barrier did not fail";
    return "";
}

TEST(PeerReports, APeerAwayThatStopsAnsweringHeartbeatsIsDeadWithinTheBound) {
    SilentPeerChannel backend;
    double seconds = 0;
    const std::string message = message_about_a_peer_away(backend, 1800, seconds);
    // Heartbeats start a second into the wait; silence past 0.5 s then is death.
    EXPECT_LT(seconds, 10) << message;
    EXPECT_GE(backend.heartbeats, 1);
    EXPECT_NE(message.find("rank 1 (pid 77 on host far) has not answered a heartbeat"), std::string::npos) << message;
    EXPECT_NE(message.find("; its last call: none, or barrier #1"), std::string::npos) << message;
}

TEST(PeerReports, APeerAwayThatAnswersHeartbeatsIsNeverCalledDead) {
    SilentPeerChannel backend;
    backend.answers_heartbeats = true;
    double seconds = 0;
    // Five times the bound: the call ends by its timeout, not as a death.
    const std::string message = message_about_a_peer_away(backend, 2.5, seconds);
    EXPECT_GE(backend.heartbeats, 1);
    EXPECT_NE(message.find("timed out on rank 0"), std::string::npos) << message;
    EXPECT_EQ(message.find("heartbeat"), std::string::npos) << message;
}

}  // namespace
}  // namespace ddp
