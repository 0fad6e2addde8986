#!/bin/sh
# Usage: run_hang_watchdog.sh EXE. Runs test_hang_watchdog under mpirun -np 2
# with the watchdog on (DDP_HANG_WATCHDOG_S=1, or the option 1 over the
# environment's off): rank 0 must end with the watchdog's message naming the
# call, its timeout and the grace period (and mpirun must end the job); and
# off (DDP_HANG_WATCHDOG_S=off, or the option -1 over the environment's 1):
# the stuck thread must come back and the barrier return DDP_ERR_TIMEOUT.
# And a reducer step whose caller computes past the deadline plus the grace
# between its marks is left alone: both ranks' ddp_reducer_wait return.
exe=$1
export DDP_TIMEOUT_S=1 DDP_STALL_WARN_S=0.3
watchdog_ends_it() {
    out=$(DDP_HANG_WATCHDOG_S=$1 timeout -s KILL 60 mpirun -np 2 "$exe" barrier $2 2>&1)
    echo "$out"
    echo "$out" | grep -q "\[ddp rank 0\] FATAL hang watchdog: barrier #1 passed its deadline (timeout 1 s) .* grace period of 1 s" &&
        ! echo "$out" | grep -q "the barrier returned"
}
thread_comes_back() {
    out=$(DDP_HANG_WATCHDOG_S=$1 timeout -s KILL 60 mpirun -np 2 "$exe" barrier $2 2>&1)
    echo "$out"
    ! echo "$out" | grep -q "FATAL hang watchdog" && echo "$out" | grep -q "rank 0: the barrier returned DDP_ERR_TIMEOUT"
}
computing_in_a_step_is_left_alone() {
    out=$(DDP_HANG_WATCHDOG_S=1 timeout -s KILL 60 mpirun -np 2 "$exe" reducer 2>&1)
    echo "$out"
    ! echo "$out" | grep -q "FATAL hang watchdog" && [ "$(echo "$out" | grep -c "the reducer step returned")" = 2 ]
}
watchdog_ends_it 1 && watchdog_ends_it off 1 && thread_comes_back off && thread_comes_back 1 -1 &&
    computing_in_a_step_is_left_alone
