// The contended mode (control/contention.hpp): said once when a wait for
// data first sleeps, once when enough waits in a row end while spinning,
// and not per wait in between; where ranks outnumber their CPUs; and when a
// wait sleeps at all: only once its operation stopped moving for its spin.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "control/contention.hpp"
#include "control/control_plane.hpp"
#include "planes/transport.hpp"

namespace {

using Change = ddp::ContentionWatch::Change;

TEST(Contention, AWaitThatSleepsStartsItOnce) {
    ddp::ContentionWatch watch;
    EXPECT_EQ(watch.wait_ended(false), Change::none);
    EXPECT_EQ(watch.wait_ended(true), Change::started);
    EXPECT_EQ(watch.wait_ended(true), Change::none);
    EXPECT_EQ(watch.wait_ended(true), Change::none);
    EXPECT_EQ(watch.slept_while_contended(), 3);
}

TEST(Contention, ItEndsAfterEnoughQuickWaitsInARow) {
    ddp::ContentionWatch watch;
    ASSERT_EQ(watch.wait_ended(true), Change::started);
    for (int i = 1; i < ddp::ContentionWatch::quiet_waits_to_end; ++i) ASSERT_EQ(watch.wait_ended(false), Change::none);
    EXPECT_EQ(watch.wait_ended(true), Change::none);  // one sleep starts the count again
    for (int i = 1; i < ddp::ContentionWatch::quiet_waits_to_end; ++i) ASSERT_EQ(watch.wait_ended(false), Change::none);
    EXPECT_EQ(watch.wait_ended(false), Change::ended);
    EXPECT_EQ(watch.wait_ended(false), Change::none);
    EXPECT_EQ(watch.wait_ended(true), Change::started);  // and it can start again
}

}  // namespace

// Waits spin briefly where a communicator's ranks outnumber the CPUs they
// share (contention.hpp): counted in this process for threads, on the node
// for processes.
TEST(CpuShare, RanksOutnumberCpusInTheProcessOrOnTheNode) {
    EXPECT_FALSE((ddp::CpuShare{1, 1, 2, 2}.outnumbered()));  // mpirun -np 2, one core each
    EXPECT_TRUE((ddp::CpuShare{2, 1, 4, 4}.outnumbered()));   // 2 threads bound to one core
    EXPECT_TRUE((ddp::CpuShare{1, 2, 3, 2}.outnumbered()));   // 3 processes on 2 cores
    EXPECT_EQ((ddp::CpuShare{4, 2, 4, 2}.describe()), "4 ranks in this process on its 2 CPUs");
    EXPECT_EQ((ddp::CpuShare{1, 2, 3, 2}.describe()), "3 ranks on this node's 2 CPUs");
}

TEST(CpuShare, ALocalGroupCountsItsThreadsAgainstTheProcessCpus) {
    const auto one = ddp::make_local_transports(1);
    const ddp::CpuShare alone = ddp::cpu_share(one.front()->channel());
    EXPECT_EQ(alone.ranks_in_process, 1);
    EXPECT_GE(alone.process_cpus, 1);
    EXPECT_FALSE(alone.outnumbered());
    const auto many = ddp::make_local_transports(alone.process_cpus + 1);
    const ddp::CpuShare crowded = ddp::cpu_share(many.front()->channel());
    EXPECT_EQ(crowded.ranks_in_process, alone.process_cpus + 1);
    EXPECT_TRUE(crowded.outnumbered());
}

namespace {

struct Sleeps {
    int all = 0, while_moving = 0;
};

/// An operation that gets a step further at each test while `moving` says
/// so (given its age), and finishes once `lasts` has passed; it counts its
/// waiter's sleeps, and those while it was moving.
class Operation final : public ddp::Pending {
public:
    Operation(std::function<bool(ddp::Clock::duration)> moving, ddp::Clock::duration lasts, Sleeps& sleeps)
        : moving_(std::move(moving)), lasts_(lasts), sleeps_(sleeps) {}
    bool test() override {
        const auto age = ddp::Clock::now() - started_;
        if (moving_(age)) ++steps_;
        return age >= lasts_;
    }
    bool sleep(ddp::Clock::time_point) override {
        ++sleeps_.all;
        if (moving_(ddp::Clock::now() - started_)) ++sleeps_.while_moving;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        return true;
    }
    uint64_t progress() const override { return steps_; }

private:
    std::function<bool(ddp::Clock::duration)> moving_;
    ddp::Clock::duration lasts_;
    Sleeps& sleeps_;
    uint64_t steps_ = 0;
    const ddp::Clock::time_point started_ = ddp::Clock::now();
};

/// How many times one wait for such an operation's data slept.
Sleeps sleeps_of_a_wait(std::function<bool(ddp::Clock::duration)> moving, ddp::Clock::duration lasts) {
    const std::unique_ptr<ddp::Transport> self = ddp::make_self_transport();
    ddp::ControlPlane control(self->channel(), 60, 60, 0);
    Sleeps sleeps;
    ddp::CallContext call = control.begin(ddp::CollectiveKind::allreduce, 0);
    control.wait(call, std::make_unique<Operation>(std::move(moving), lasts, sleeps), ddp::WaitStyle::for_data);
    control.end();
    return sleeps;
}

}  // namespace

// A long operation of many steps whose peers keep moving (the shared-memory
// plane's chunks) spins: a sleep would cost a wake at every step.
TEST(Waits, AWaitWhoseOperationKeepsMovingNeverSleeps) {
    EXPECT_EQ(sleeps_of_a_wait([](auto) { return true; }, 10 * ddp::hot_spin).all, 0);
}

TEST(Waits, AWaitWhoseOperationStopsMovingSleepsAfterItsSpin) {
    const auto moves_until = 2 * ddp::hot_spin;
    EXPECT_GT(sleeps_of_a_wait([=](auto age) { return age < moves_until; }, 10 * ddp::hot_spin).all, 0);
}

// Peers that were late once may be off their cores: spinning on at each of
// their steps would hold the core they need, so the wait sleeps between them.
TEST(Waits, AWaitThatSleptOnceSleepsBetweenSteps) {
    const auto still_from = 2 * ddp::hot_spin, moving_again = 5 * ddp::hot_spin;
    const Sleeps sleeps = sleeps_of_a_wait(
        [=](auto age) { return age < still_from || age >= moving_again; }, 10 * ddp::hot_spin);
    EXPECT_GT(sleeps.while_moving, 0);
}

