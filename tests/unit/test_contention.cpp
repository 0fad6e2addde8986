// The contended mode (control/contention.hpp): said once when a wait for
// data first sleeps, once when enough waits in a row end while spinning,
// and not per wait in between; and where ranks outnumber their CPUs.
#include <gtest/gtest.h>

#include "control/contention.hpp"
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
