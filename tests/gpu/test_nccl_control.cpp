// libddp's reactions to NCCL, driven by the fault-injecting stand-in
// (nccl_standin.c) loaded through DDP_NCCL_LIBRARY as libddp loads the real
// one: loading checks, a setup that never completes, a setup error, an
// asynchronous error caught by the watchdog. No GPU is used, and nothing
// here shows that data moves on a GPU (scripts/gpu-proof does that).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "control/channel.hpp"
#include "planes/transport.hpp"
#include "planes/nccl/nccl_comm.hpp"
#include "planes/nccl/nccl_library.hpp"
#include "planes/nccl/watchdog.hpp"
#include "control/control_plane.hpp"
#include "util/error.hpp"
#include "nccl_comms_on_threads.hpp"

namespace {

using namespace ddp;

// The stand-in builds, passed by meson.
std::string library(const char* variable) {
    const char* path = std::getenv(variable);
    return path != nullptr ? path : "";
}

/// The stand-in, once libddp has loaded it (kept loaded: no dlclose).
void* standin() { return dlopen(library("STANDIN").c_str(), RTLD_NOW | RTLD_NOLOAD); }

int count_of(const char* counter) {
    if (standin() == nullptr) return -1;
    auto count = reinterpret_cast<int (*)()>(dlsym(standin(), counter));
    return count != nullptr ? count() : -1;
}

int abort_count() { return count_of("standin_abort_count"); }
int split_abort_count() { return count_of("standin_split_abort_count"); }

/// The message of the Error that `body` throws with `status`.
template <typename Body>
std::string error_of(Body body, ddp_status status) {
    try {
        body();
    } catch (const Error& error) {
        EXPECT_EQ(error.status(), status) << error.what();
        return error.what();
    }
    ADD_FAILURE() << "no error was thrown";
    return "";
}

// Loading runs first: once a library loads, the process keeps it.
TEST(NcclLoading, AMissingLibrarySaysWhereToGetNccl) {
    setenv("DDP_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    const std::string message = error_of([] { nccl_library(); }, DDP_ERR_UNSUPPORTED);
    EXPECT_NE(message.find("dlopen(\"/nonexistent/libnccl.so.2\") failed"), std::string::npos) << message;
    EXPECT_NE(message.find("nvidia-nccl-cu13"), std::string::npos) << message;
}

TEST(NcclLoading, AnOldNcclIsRefusedWithItsVersion) {
    setenv("DDP_NCCL_LIBRARY", library("STANDIN_OLD").c_str(), 1);
    const std::string message = error_of([] { nccl_library(); }, DDP_ERR_UNSUPPORTED);
    EXPECT_NE(message.find("is NCCL 2.10.3 but libddp needs NCCL 2.18 or newer"), std::string::npos) << message;
}

TEST(NcclLoading, AMissingFunctionIsNamed) {
    setenv("DDP_NCCL_LIBRARY", library("STANDIN_INCOMPLETE").c_str(), 1);
    const std::string message = error_of([] { nccl_library(); }, DDP_ERR_UNSUPPORTED);
    EXPECT_NE(message.find("has no function ncclCommInitRankConfig"), std::string::npos) << message;
}

class NcclSetup : public ::testing::Test {
protected:
    void SetUp() override {
        setenv("DDP_NCCL_LIBRARY", library("STANDIN").c_str(), 1);
        nccl = &nccl_library();
    }
    void TearDown() override { unsetenv("NCCL_STANDIN_MODE"); }

    const NcclLibrary* nccl = nullptr;
    std::unique_ptr<Transport> host = make_self_transport();
};

TEST_F(NcclSetup, TheStandInLoads) {
    EXPECT_EQ(nccl->version_text(), "2.28.9");
    EXPECT_EQ(nccl->path, library("STANDIN"));
}

TEST_F(NcclSetup, ASetupThatNeverCompletesTimesOutAndAbortsNccl) {
    setenv("NCCL_STANDIN_MODE", "setup_hangs", 1);
    ControlPlane control(host->channel(), 0.3, 10, 0);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    const int aborts = abort_count();
    const auto start = std::chrono::steady_clock::now();
    const std::string message = error_of([&] { NcclComm comm(*nccl, host->channel(), *host->host_planes().front(), control, context); }, DDP_ERR_TIMEOUT);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    control.end();
    EXPECT_NE(message.find("setting up the NCCL communicator did not finish within the timeout on rank 0"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("NCCL was aborted"), std::string::npos) << message;
    EXPECT_EQ(abort_count(), aborts + 1);
    EXPECT_GE(waited, 0.29);
    EXPECT_LT(waited, 5.0);
}

TEST_F(NcclSetup, ASetupErrorQuotesNccl) {
    setenv("NCCL_STANDIN_MODE", "setup_fails", 1);
    ControlPlane control(host->channel(), 10, 10, 0);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    const int aborts = abort_count();
    const std::string message = error_of([&] { NcclComm comm(*nccl, host->channel(), *host->host_planes().front(), control, context); }, DDP_ERR_BACKEND);
    control.end();
    EXPECT_NE(message.find("setting up the NCCL communicator failed on rank 0: remote process exited or there was a "
                           "network error: stand-in: the peer's proxy connection was refused"),
              std::string::npos)
        << message;
    EXPECT_EQ(abort_count(), aborts + 1);
}

TEST_F(NcclSetup, TheWatchdogAbortsOnAnAsyncErrorAndFailsLaterWork) {
    setenv("NCCL_STANDIN_MODE", "async_error", 1);
    ControlPlane control(host->channel(), 10, 10, 0);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    NcclComm comm(*nccl, host->channel(), *host->host_planes().front(), control, context);
    control.end();
    const int aborts = abort_count();

    std::mutex mutex;
    std::condition_variable reported;
    std::optional<std::pair<ddp_status, std::string>> failure;
    {
        Watchdog watchdog(-1,
                          [&]() -> std::optional<Failure> {
                              if (auto error = comm.async_error())
                                  return Failure{DDP_ERR_BACKEND, "NCCL reported an error: " + *error};
                              return std::nullopt;
                          },
                          [&](ddp_status status, const std::string& message) {
                              comm.abort();
                              control.break_from_device(status, message, false);
                              std::lock_guard lock(mutex);
                              failure = std::pair{status, message};
                              reported.notify_all();
                          });
        std::unique_lock lock(mutex);
        ASSERT_TRUE(reported.wait_for(lock, std::chrono::seconds(5), [&] { return failure.has_value(); }))
            << "the watchdog never reported NCCL's asynchronous error";
        lock.unlock();
        EXPECT_EQ(failure->first, DDP_ERR_BACKEND);
        EXPECT_NE(failure->second.find("NCCL reported an error: remote process exited or there was a network error: "
                                       "stand-in: the peer's proxy connection was refused"),
                  std::string::npos)
            << failure->second;
        // Work handed over after the failure ends at once with it.
        std::optional<ddp_status> ended;
        watchdog.watch(nullptr, deadline_after(10), "allreduce #2",
                       [&](ddp_status status, const std::string&) { ended = status; });
        EXPECT_EQ(ended, DDP_ERR_BACKEND);
    }
    EXPECT_TRUE(comm.aborted());
    EXPECT_EQ(abort_count(), aborts + 1);
    // The communicator is broken with NCCL's message, as a later call sees it.
    const std::string message = error_of([&] { control.require_usable(); }, DDP_ERR_BACKEND);
    EXPECT_NE(message.find("stand-in: the peer's proxy connection was refused"), std::string::npos) << message;
}

/// A parent communicator (set up in the stand-in's "ok" mode) to split.
class NcclSplit : public NcclSetup {
protected:
    void SetUp() override {
        NcclSetup::SetUp();
        ControlPlane control(host->channel(), 10, 10, 0);
        CallContext context = control.begin(CollectiveKind::barrier, 0);
        parent = std::make_unique<NcclComm>(*nccl, host->channel(), *host->host_planes().front(), control, context);
        control.end();
    }
    std::unique_ptr<NcclComm> parent;
};

TEST_F(NcclSplit, AColorGetsACommunicatorAndNoColorGetsNone) {
    const auto no_failure = [](ddp_status, const std::string& message) { ADD_FAILURE() << message; };
    std::unique_ptr<NcclComm> sub = NcclComm::split(*parent, 0, 0, deadline_after(10), no_failure);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->get(), reinterpret_cast<ncclComm_t>(dlsym(standin(), "standin_split_comm")))
        << "the handle NCCL stores from its own thread when the split ends";
    EXPECT_EQ(NcclComm::split(*parent, -1, 0, deadline_after(10), no_failure), nullptr);
    EXPECT_FALSE(parent->aborted());
}

/// Aborts of the parent (setup's handle) and of the split's communicator, as
/// `failing` saw them when it ran: it must run before either.
struct AbortsSeen {
    int parent = -1, split = -1;
};

TEST_F(NcclSplit, ASplitThatNeverCompletesTimesOutThenAbortsTheParentAndTheNewCommunicator) {
    setenv("NCCL_STANDIN_MODE", "split_hangs", 1);
    const int aborts = abort_count(), split_aborts = split_abort_count();
    AbortsSeen seen;
    const auto start = std::chrono::steady_clock::now();
    const std::string message = error_of(
        [&] {
            NcclComm::split(*parent, 0, 3, deadline_after(0.3), [&](ddp_status status, const std::string&) {
                EXPECT_EQ(status, DDP_ERR_TIMEOUT);
                seen = {abort_count(), split_abort_count()};
            });
        },
        DDP_ERR_TIMEOUT);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(message.find("ncclCommSplit (color 0) did not finish"), std::string::npos) << message;
    EXPECT_NE(message.find("NCCL was aborted"), std::string::npos) << message;
    EXPECT_EQ(seen.parent, aborts) << "failing ran after an abort";
    EXPECT_EQ(seen.split, split_aborts);
    // The parent's abort ended the split's job, which returned the new
    // communicator (into memory that still lived): it is aborted too.
    EXPECT_TRUE(parent->aborted());
    EXPECT_EQ(split_abort_count(), split_aborts + 1);
    EXPECT_EQ(abort_count(), aborts + 2);
    EXPECT_GE(waited, 0.29);
    EXPECT_LT(waited, 5.0);
}

TEST_F(NcclSplit, ASplitErrorQuotesNcclAndAbortsBoth) {
    setenv("NCCL_STANDIN_MODE", "split_fails", 1);
    const int aborts = abort_count(), split_aborts = split_abort_count();
    AbortsSeen seen;
    const std::string message = error_of(
        [&] {
            NcclComm::split(*parent, 1, 0, deadline_after(10), [&](ddp_status, const std::string&) {
                seen = {abort_count(), split_abort_count()};
            });
        },
        DDP_ERR_BACKEND);
    EXPECT_NE(message.find("ncclCommSplit (color 1) failed: unhandled system error: stand-in: the split's ranks "
                           "could not connect"),
              std::string::npos)
        << message;
    EXPECT_EQ(seen.parent, aborts);
    EXPECT_EQ(split_abort_count(), split_aborts + 1);
    EXPECT_EQ(abort_count(), aborts + 2);
}

TEST_F(NcclSplit, ARefusedSplitQuotesNcclAndAbortsTheParent) {
    setenv("NCCL_STANDIN_MODE", "split_refused", 1);
    bool failing_ran = false;
    const std::string message = error_of(
        [&] {
            NcclComm::split(*parent, 0, 0, deadline_after(10),
                            [&](ddp_status, const std::string&) { failing_ran = true; });
        },
        DDP_ERR_BACKEND);
    EXPECT_NE(message.find("ncclCommSplit (color 0) failed: invalid usage: stand-in: ncclCommSplit refused the call"),
              std::string::npos)
        << message;
    EXPECT_TRUE(failing_ran);
    EXPECT_TRUE(parent->aborted());
}

/// A variable of the stand-in (found by dlsym), -2 when it is not found.
int standin_int(const char* name) {
    const void* found = standin() != nullptr ? dlsym(standin(), name) : nullptr;
    return found != nullptr ? *static_cast<const int*>(found) : -2;
}

TEST_F(NcclSplit, DataCallsGoToABlockingLauncherSharingTheCommunicatorsResources) {
    parent->add_launcher(0, deadline_after(10), [](ddp_status, const std::string& message) { ADD_FAILURE() << message; });
    EXPECT_EQ(parent->get(), reinterpret_cast<ncclComm_t>(dlsym(standin(), "standin_split_comm")));
    EXPECT_EQ(standin_int("standin_split_blocking"), 1) << "NCCL launches a blocking communicator's calls in place";
    EXPECT_EQ(standin_int("standin_init_share"), 1)
        << "NCCL shares the abort flag with a split only when the parent was made with splitShare";
    const int aborts = abort_count(), split_aborts = split_abort_count();
    bool ran = false;
    parent->group([&] { ran = true; }, deadline_after(10), "a group");
    EXPECT_TRUE(ran);
    parent->abort();
    EXPECT_EQ(abort_count(), aborts + 2) << "the communicator and its launcher";
    EXPECT_EQ(split_abort_count(), split_aborts + 1);
}

TEST_F(NcclSplit, ALaunchThatNcclBlocksInIsOverdueAtItsDeadlineAndEndsOnAnAbort) {
    parent->add_launcher(0, deadline_after(10), [](ddp_status, const std::string& message) { ADD_FAILURE() << message; });
    setenv("NCCL_STANDIN_MODE", "launch_blocks", 1);
    const int split_aborts = split_abort_count();
    EXPECT_FALSE(parent->launch_overdue());
    std::thread watchdog([&] {
        // As the watchdog: sees the launch overdue, then aborts while the launch holds its lock.
        const auto give_up = deadline_after(2);
        while (!parent->launch_overdue() && Clock::now() < give_up)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_TRUE(parent->launch_overdue());
        parent->abort();
    });
    const auto start = Clock::now();
    const std::string message =
        error_of([&] { parent->group([] {}, deadline_after(0.2), "ncclGroupEnd after a test's calls"); },
                 DDP_ERR_BACKEND);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    watchdog.join();
    EXPECT_GE(took, 0.19);
    EXPECT_LT(took, 2.5) << "the abort did not end the launch";
    EXPECT_FALSE(parent->launch_overdue()) << "no launch is in progress";
    EXPECT_NE(message.find("ncclGroupEnd after a test's calls failed"), std::string::npos) << message;
    EXPECT_NE(message.find("the launch ended on the abort flag"), std::string::npos) << message;
    EXPECT_TRUE(parent->aborted());
    EXPECT_EQ(split_abort_count(), split_aborts + 1) << "the launcher is aborted once its launch has returned";
}

TEST_F(NcclSplit, AHealthyTeardownFinalizesTheLauncherWithoutAborting) {
    parent->add_launcher(0, deadline_after(10), [](ddp_status, const std::string& message) { ADD_FAILURE() << message; });
    const int aborts = abort_count();
    parent.reset();
    EXPECT_EQ(abort_count(), aborts) << "finalized and destroyed, not aborted";
}

// ddp_init_local with devices: each rank's thread sets up its own NCCL
// communicator (and launcher) over the group's channel, at once.
TEST_F(NcclSetup, EachThreadOfALocalGroupSetsUpItsOwnCommunicatorOverTheGroupsChannel) {
    constexpr int ranks = 3;
    std::vector<std::unique_ptr<Transport>> transports = make_local_transports(ranks);
    std::vector<std::unique_ptr<NcclComm>> comms =
        nccl_comms_on_threads(*nccl, transports, 10, [](int rank, NcclComm& comm, CallContext& context) {
            comm.add_launcher(rank, context.deadline,
                              [](ddp_status, const std::string& message) { ADD_FAILURE() << message; });
        });
    const auto* sizes = static_cast<const int*>(dlsym(standin(), "standin_init_size"));
    const auto* ids = static_cast<const unsigned char*>(dlsym(standin(), "standin_init_id"));
    ASSERT_NE(sizes, nullptr);
    ASSERT_NE(ids, nullptr);
    for (int rank = 0; rank < ranks; ++rank) {
        ASSERT_NE(comms[static_cast<size_t>(rank)], nullptr);
        EXPECT_EQ(comms[static_cast<size_t>(rank)]->get(),
                  reinterpret_cast<ncclComm_t>(dlsym(standin(), "standin_split_comm")))
            << "rank " << rank << "'s data calls go to its launcher";
        EXPECT_EQ(sizes[rank], ranks);
        EXPECT_EQ(ids[rank], ids[0]) << "rank " << rank << " got rank 0's unique id through the group's channel";
    }
}

// Run by itself (meson's nccl_control_without_split): a process keeps the first NCCL it loads.
TEST(NcclWithoutSplit, SplitIsUnsupportedAndSaysWhy) {
    setenv("DDP_NCCL_LIBRARY", library("STANDIN_WITHOUT_SPLIT").c_str(), 1);
    const NcclLibrary& nccl = nccl_library();  // everything else is there: it loads
    EXPECT_EQ(nccl.comm_split, nullptr);
    std::unique_ptr<Transport> host = make_self_transport();
    ControlPlane control(host->channel(), 10, 10, 0);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    NcclComm parent(nccl, host->channel(), *host->host_planes().front(), control, context);
    control.end();
    const std::string message = error_of(
        [&] {
            NcclComm::split(parent, 0, 0, deadline_after(10),
                            [](ddp_status, const std::string& why) { ADD_FAILURE() << why; });
        },
        DDP_ERR_UNSUPPORTED);
    EXPECT_NE(message.find("is NCCL 2.28.9, which has no ncclCommSplit (NCCL 2.18.1 added it)"), std::string::npos)
        << message;
    EXPECT_NE(message.find("DDP_BACKEND=mpi"), std::string::npos) << message;
    EXPECT_FALSE(parent.aborted());
}

// Before NCCL is aborted for any other reason (a timeout on the host,
// ddp_comm_abort, finalize), the watched work fails: aborted kernels end
// their events as if they had finished, which must not read as success.
TEST(Watchdog, FailAllEndsWatchedAndLaterWorkWithTheReason) {
    bool reported = false;
    Watchdog watchdog(-1, [] { return std::optional<Failure>(); },
                      [&](ddp_status, const std::string&) { reported = true; });
    std::vector<std::pair<std::string, ddp_status>> ended;
    std::mutex mutex;
    auto record = [&](std::string what) {
        return [&, what](ddp_status status, const std::string&) {
            std::lock_guard lock(mutex);
            ended.emplace_back(what, status);
        };
    };
    // Null events: work handed over after a failure is never polled (no
    // CUDA here to make real ones).
    watchdog.fail_all(DDP_ERR_TIMEOUT, "rank 0 gave up");
    watchdog.watch(nullptr, deadline_after(100), "allreduce #3", record("allreduce #3"));
    watchdog.fail_all(DDP_ERR_BACKEND, "a later reason");  // the first stays
    watchdog.watch(nullptr, deadline_after(100), "allreduce #4", record("allreduce #4"));
    EXPECT_TRUE(watchdog.drain(deadline_after(1)));
    std::lock_guard lock(mutex);
    ASSERT_EQ(ended.size(), 2u);
    EXPECT_EQ(ended[0], std::pair(std::string("allreduce #3"), DDP_ERR_TIMEOUT));
    EXPECT_EQ(ended[1], std::pair(std::string("allreduce #4"), DDP_ERR_TIMEOUT));
    EXPECT_FALSE(reported);  // failures from outside are the owner's to report
}

}  // namespace
