#!/bin/sh
# Usage: run_hang_watchdog.sh EXE. Runs test_hang_watchdog twice under
# mpirun -np 2: with DDP_HANG_WATCHDOG_S=1 rank 0 must end with the
# watchdog's message naming the call, its timeout and the grace period (and
# mpirun must end the job); with DDP_HANG_WATCHDOG_S=off the stuck thread
# must come back and the barrier return DDP_ERR_TIMEOUT.
exe=$1
export DDP_TIMEOUT_S=1 DDP_STALL_WARN_S=0.3
on=$(DDP_HANG_WATCHDOG_S=1 timeout -s KILL 60 mpirun -np 2 "$exe" 2>&1)
echo "$on"
echo "$on" | grep -q "\[ddp rank 0\] FATAL hang watchdog: barrier #1 passed its deadline (timeout 1 s) .* grace period of 1 s" || exit 1
echo "$on" | grep -q "the barrier returned" && exit 1
off=$(DDP_HANG_WATCHDOG_S=off timeout -s KILL 60 mpirun -np 2 "$exe" 2>&1)
echo "$off"
echo "$off" | grep -q "FATAL hang watchdog" && exit 1
echo "$off" | grep -q "rank 0: the barrier returned DDP_ERR_TIMEOUT"
