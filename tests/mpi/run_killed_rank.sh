#!/bin/sh
# Runs test_killed_rank under mpirun with --enable-recovery (so that mpirun
# keeps the survivor alive when its peer is killed) and passes when the
# survivor reported a timeout and a bounded finalize. mpirun's own exit
# status is not 0 (a rank was killed), so the survivor's line decides.
exe=$1
out=$(timeout 60 mpirun --enable-recovery -np 2 --mca btl self,vader "$exe" 2>&1)
echo "$out"
echo "$out" | grep -q "SURVIVOR OK"
