# Simulated nodes for the multi-node tests, sourced by run_case.sh: one
# network namespace per node (its own address on a private bridge, and its
# own host name through unshare --uts), joined by veth pairs to a bridge in
# a namespace of its own, so that the host's network is never touched. All
# names carry DDP_MN_PREFIX (unique per run) so that parallel runs do not
# collide, and cluster_down removes everything on every way out (trap).
subnet=10.77.0.0/24

# Prints why simulated nodes cannot run here, or nothing when they can.
cluster_unavailable() {
    [ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces)"; return; }
    command -v ip >/dev/null || { echo "needs iproute2 (ip)"; return; }
    command -v unshare >/dev/null || { echo "needs unshare (util-linux)"; return; }
    command -v mpirun >/dev/null || { echo "needs Open MPI's mpirun"; return; }
    ip netns add "$DDP_MN_PREFIX-probe" 2>/dev/null || { echo "cannot create network namespaces here"; return; }
    ip -n "$DDP_MN_PREFIX-probe" link add br0 type bridge 2>/dev/null ||
        { ip netns del "$DDP_MN_PREFIX-probe"; echo "no bridge support in this kernel"; return; }
    ip netns exec "$DDP_MN_PREFIX-probe" unshare --uts true 2>/dev/null ||
        { ip netns del "$DDP_MN_PREFIX-probe"; echo "cannot create UTS namespaces here"; return; }
    ip netns del "$DDP_MN_PREFIX-probe"
}

# cluster_up N: nodes node0..node(N-1) at 10.77.0.10.., and a hostfile.
cluster_up() {
    nodes=$1
    ip netns add "$DDP_MN_PREFIX-switch"
    ip -n "$DDP_MN_PREFIX-switch" link add br0 type bridge
    ip -n "$DDP_MN_PREFIX-switch" link set br0 up
    : >"$DDP_MN_OUT/hostfile"
    i=0
    while [ "$i" -lt "$nodes" ]; do
        ns=$DDP_MN_PREFIX-node$i
        ip netns add "$ns"
        ip -n "$DDP_MN_PREFIX-switch" link add "port$i" type veth peer name eth0 netns "$ns"
        ip -n "$DDP_MN_PREFIX-switch" link set "port$i" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "10.77.0.$((10 + i))/24" dev eth0
        ip -n "$ns" link set eth0 up
        echo "10.77.0.$((10 + i)) slots=$slots" >>"$DDP_MN_OUT/hostfile"
        i=$((i + 1))
    done
}

# Removes every namespace of this run, ending what still runs inside them.
cluster_down() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$DDP_MN_PREFIX-"); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
}

# cluster_mpirun NP ARGS...: mpirun from node0 over TCP on the bridge only,
# with keepalive on the launcher's own connections so that it notices a
# node gone within about 11 s (else it waits for ever on a lost daemon).
# DDP_MN_KEEPALIVE_PROBES (default 3): how many unanswered probes mean gone.
cluster_mpirun() {
    np=$1
    shift
    ip netns exec "$DDP_MN_PREFIX-node0" unshare --uts sh -c 'hostname node0 && exec "$@"' sh \
        mpirun --allow-run-as-root --oversubscribe -np "$np" --hostfile "$DDP_MN_OUT/hostfile" \
        --mca plm_rsh_agent "$here/rsh_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca btl self,tcp --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" \
        --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes "${DDP_MN_KEEPALIVE_PROBES:-3}" \
        -x DDP_MN_OUT -x DDP_TIMEOUT_S -x DDP_HANG_WATCHDOG_S -x DDP_STALL_WARN_S -x DDP_BACKEND \
        ${DDP_MN_PERTURB:+-x MALLOC_PERTURB_="$DDP_MN_PERTURB"} ${DDP_HIERARCHICAL:+-x DDP_HIERARCHICAL} \
        ${DDP_MN_FLOATS:+-x DDP_MN_FLOATS} ${DDP_MN_COMPUTE_S:+-x DDP_MN_COMPUTE_S} -x DDP_FLIGHT_RECORDER_DIR \
        ${DDP_SHM:+-x DDP_SHM} ${DDP_LOG_LEVEL:+-x DDP_LOG_LEVEL} ${DDP_PEER_DEAD_S:+-x DDP_PEER_DEAD_S} "$@"
}
