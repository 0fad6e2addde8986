#!/bin/sh
# Usage: run_killed_rank.sh EXE BTL (vader or tcp).
# Runs test_killed_rank under mpirun with --enable-recovery (so that mpirun
# keeps the survivor alive when its peer is killed) over Open MPI's BTL and
# passes when the survivor reported a timeout and a bounded finalize.
# mpirun's own exit status is not 0 (a rank was killed), so the survivor's
# line decides. Over TCP, Open MPI 4.1 can deadlock the survivor's thread
# inside MPI_Testall (its TCP transport, closing the dead peer's connection,
# takes a lock that thread already holds): no deadline reaches a thread
# inside MPI, so there the hang watchdog's message, naming the call and its
# timeout, also passes: it ended the process and thus the job.
exe=$1
btl=${2:-vader}
# Meson's MALLOC_PERTURB_ makes mpirun itself crash (SIGSEGV in
# pmix_server_log_fn, logging a failed reconnection to the dead rank; 1 run
# in 4 over TCP): Open MPI's bug, not the one under test. The ranks keep it.
perturb=${MALLOC_PERTURB_:-}
unset MALLOC_PERTURB_
for attempt in 1 2; do
    out=$(timeout -s KILL 60 mpirun --enable-recovery -np 2 --mca btl "self,$btl" \
        ${perturb:+-x MALLOC_PERTURB_="$perturb"} "$exe" 2>&1)
    echo "$out"
    echo "$out" | grep -q "SURVIVOR OK" && exit 0
    [ "$btl" = tcp ] &&
        echo "$out" | grep -q "FATAL hang watchdog: \(allreduce #[0-9]* passed its deadline (timeout 2 s)\|ddp_finalize passed\)" &&
        exit 0
    # Without MALLOC_PERTURB_ too, rarely (twice in about 80 runs here): the
    # same crash takes the survivor with it, and the run is made once more.
    echo "$out" | grep -q "pmix_server_log_fn" || exit 1
    echo "(mpirun crashed in pmix_server_log_fn: Open MPI's bug; running again)"
done
exit 1
