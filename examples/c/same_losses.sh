#!/bin/sh
# Usage: same_losses.sh TRAIN_MLP OTHER [--local | --mixed]. TRAIN_MLP on 2
# ranks under mpirun and OTHER must both train (exit 0) and log the same loss
# every epoch: OTHER is train_mlp_zero (ZeRO-1 with plain SGD takes the same
# steps as the replicated optimizer, only sharded) under mpirun; with
# --local, TRAIN_MLP itself as 2 threads of one process (ddp_init_local, no
# mpirun); with --mixed, 4 processes of TRAIN_MLP against TRAIN_MLP as 2
# processes of 2 threads each (ddp_init_local under mpirun).
set -u
losses() {
    out=$(timeout -s KILL 100 "$@" 2>&1) || { echo "$out"; echo "$* failed"; exit 1; }
    echo "$out" >&2
    echo "$out" | sed -n 's/.*\(epoch *[0-9]*  loss [0-9.]*\)$/\1/p'
}
ranks=2
[ "${3:-}" = --mixed ] && ranks=4
replicated=$(losses mpirun --oversubscribe -np "$ranks" "$1") || exit 1
if [ "${3:-}" = --local ]; then
    other=$(losses "$2" --local 2) || exit 1
    how="as 2 threads of one process"
elif [ "${3:-}" = --mixed ]; then
    other=$(losses mpirun -np 2 "$2" --local 2) || exit 1
    how="as 2 processes of 2 threads"
else
    other=$(losses mpirun -np 2 "$2") || exit 1
    how="with ZeRO-1"
fi
[ "$(echo "$replicated" | wc -l)" -gt 1 ] || { echo "no losses logged"; exit 1; }
[ "$replicated" = "$other" ] || { printf 'losses differ:\n%s\n\n%s:\n%s\n' "$replicated" "$how" "$other"; exit 1; }
echo "same losses on $ranks ranks $how"
