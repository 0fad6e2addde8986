#!/bin/bash
# Old (e89fa89) against new hierarchical plane, 2 nodes x 2 ranks, alternating.
set -eu
cd /work/main
runs=${1:-6}
csv=/tmp/t/hier-ab.csv
rm -f "$csv"
here=$PWD/tests/multinode
export DDP_MN_PREFIX="ddpab$$" DDP_MN_OUT
DDP_MN_OUT=$(mktemp -d /tmp/ddp-ab.XXXXXX)
export DDP_BACKEND=mpi DDP_MN_PERTURB=
. "$here/cluster.sh"
trap 'cluster_down; rm -rf "$DDP_MN_OUT"' EXIT
slots=2
cluster_up 2
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then bin=/tmp/hier-old/build/bench/hierarchical_bench; else bin=/work/main/build-bench/bench/hierarchical_bench; fi
    [ -n "${ONLY_MPI:-}" ] || DDP_SHM=1 DDP_HIERARCHICAL=1 cluster_mpirun 4 "$bin" "$runs" "$csv" "$side shm r$round"
    DDP_SHM=0 DDP_HIERARCHICAL=1 cluster_mpirun 4 "$bin" "$runs" "$csv" "$side mpinode r$round"
  done
done
