#!/bin/sh
# Usage: same_losses.sh TRAIN_MLP TRAIN_MLP_ZERO. Both must train (exit 0) on
# 2 ranks and log the same loss every epoch: ZeRO-1 with plain SGD takes the
# same steps as the replicated optimizer, only sharded.
set -u
losses() {
    out=$(timeout -s KILL 100 mpirun -np 2 "$1" 2>&1) || { echo "$out"; echo "$1 failed"; exit 1; }
    echo "$out" >&2
    echo "$out" | sed -n 's/.*\(epoch *[0-9]*  loss [0-9.]*\)$/\1/p'
}
replicated=$(losses "$1") || exit 1
zero=$(losses "$2") || exit 1
[ "$(echo "$replicated" | wc -l)" -gt 1 ] || { echo "no losses logged"; exit 1; }
[ "$replicated" = "$zero" ] || { printf 'losses differ:\n%s\n\nZeRO-1:\n%s\n' "$replicated" "$zero"; exit 1; }
echo "same losses on 2 ranks"
