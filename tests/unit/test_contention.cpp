// The contended mode (control/contention.hpp): said once when a wait for
// data first sleeps, once when enough waits in a row end while spinning,
// and not per wait in between.
#include <gtest/gtest.h>

#include "control/contention.hpp"

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
