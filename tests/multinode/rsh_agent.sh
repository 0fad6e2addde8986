#!/bin/sh
# Open MPI's rsh agent for simulated nodes (plm_rsh_agent): called as
# `rsh_agent.sh HOST COMMAND...` with HOST a node's address 10.77.0.(10+i),
# it runs COMMAND (a shell command line: Open MPI's daemon) inside node i's
# network namespace, ${DDP_MN_PREFIX}-node$i, in a UTS namespace of its own
# whose host name is node$i.
host=$1
shift
i=${host##*.}
i=$((i - 10))
exec ip netns exec "${DDP_MN_PREFIX}-node$i" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "node$i" "$*"
