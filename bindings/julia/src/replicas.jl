# Several ranks in one process (`ddp_init_local`, experimental): Conflux.jl's way of
# training, every replica of a model in one Julia process, driven from its threads or
# from one task, without a launcher or MPI.

"""
    Replicas

`n` copies of a value, copy `i` (1-based) owned by rank `i - 1` of a group of `n` ranks
inside this process; made by `DDP.replicate`. Index it for the copies; `DDP.communicator(r, i)`
is copy `i`'s rank, for the usual collectives from a thread of its own
(`allreduce!(g, :avg, DDP.communicator(r, i))`). `close(r)` ends the group (at exit if not
before).
"""
struct Replicas{T} <: AbstractVector{T}
    copies::Vector{T}
    comms::Vector{Communicator}
end

Base.size(r::Replicas) = size(r.copies)
Base.getindex(r::Replicas, i::Int) = r.copies[i]
Base.isopen(r::Replicas) = r.comms in OPEN_GROUPS

"""The ranks of every group from `DDP.replicate` not closed yet, ended at exit (the
copies are not kept here: a dropped `Replicas` is collected, its group ends at exit)."""
const OPEN_GROUPS = Set{Vector{Communicator}}()
const ENDS_AT_EXIT = Ref(false)

"""
    DDP.communicator(r::Replicas, i)

The rank that owns copy `i` of `r` (rank `i - 1` of its group).
"""
communicator(r::Replicas, i::Integer) = r.comms[i]

"""
    DDP.replicate(x, n; timeout_s = 0.0) -> Replicas

Starts a group of `n` ranks inside this process (`ddp_init_local`) and gives each a
`deepcopy` of `x` (a model, an array, any tree): Conflux's `replicate`, on the CPU.
`timeout_s` as for `DDP.Init` (0: `DDP_TIMEOUT_S`, else 1800 s). Local: no launcher, no
MPI; under `mpirun` every process's copies are ranks of one group across the processes
(copy `i` of process `p` is rank `p × n + i - 1`).

    DDP.replicate(x, devices::AbstractVector{<:Integer})

One copy per CUDA device (CuArrays, through the CUDA extension): not built yet in
Julia, refused with `DDP_ERR_UNSUPPORTED` (C's `ddp_init_local` takes devices).
"""
function replicate(x, n::Integer; timeout_s = 0.0)
    n isa Bool && throw(ArgumentError("n: expected the number of replicas, got $n"))
    return replicas_of(x, init_local(n, timeout_s))
end

function replicate(x, devices::AbstractVector{<:Integer}; timeout_s = 0.0)
    throw(DDPError(LibDDP.DDP_ERR_UNSUPPORTED,
                   "DDP.replicate(x, devices): copies on GPUs (each moved to its device through " *
                   "CUDA.jl) are not built yet in Julia; C's ddp_init_local takes devices"))
end

"""A deep copy of `x` for each of `comms`' ranks; the ranks are ended if copying fails."""
function replicas_of(x, comms::Vector{Communicator})
    copies = try
        [deepcopy(x) for _ in comms]
    catch
        foreach(comm -> LibDDP.ddp_finalize(comm.handle), comms)
        rethrow()
    end
    if !ENDS_AT_EXIT[]
        atexit(() -> foreach(finalize_group!, collect(OPEN_GROUPS)))
        ENDS_AT_EXIT[] = true
    end
    push!(OPEN_GROUPS, comms)
    return Replicas(copies, comms)
end

"""Ends every rank of `comms` (`ddp_finalize`, which waits for no peer), then throws the
first error."""
function finalize_group!(comms::Vector{Communicator})
    delete!(OPEN_GROUPS, comms)
    statuses = [LibDDP.ddp_finalize(comm.handle) for comm in comms]
    foreach(check, statuses)
end

"""
    init_local(n, timeout_s)

`n` communicators of one in-process group on host memory (`ddp_init_local`). libddp
checks `n` and the options and names what is wrong.
"""
function init_local(n::Integer, timeout_s)
    reason = seconds_error("timeout_s", timeout_s, "0: DDP_TIMEOUT_S, else 1800")
    reason === nothing || throw(ArgumentError(reason))
    typemin(Int32) <= n <= typemax(Int32) ||
        throw(ArgumentError("n = $n: expected a number of ranks that fits in 32 bits"))
    opts = Ref{LibDDP.ddp_init_options}()
    check(LibDDP.ddp_init_options_init(opts, sizeof(LibDDP.ddp_init_options)))
    opts[] = LibDDP.ddp_init_options(opts[].struct_size, opts[].backend, opts[].mpi_comm_fortran,
                                     seconds(timeout_s), opts[].hang_watchdog_s)
    handles = fill(Ptr{LibDDP.ddp_comm}(C_NULL), max(Int(n), 1))  # libddp names a bad n itself
    check(LibDDP.ddp_init_local(Int32(n), C_NULL, opts, handles))
    return [Communicator(handle) for handle in handles[1:n]]
end

"""
    close(r::Replicas)

Ends every rank of `r`'s group in turn (`ddp_finalize`, which waits for no peer).
Calling it again does nothing.
"""
function Base.close(r::Replicas)
    isopen(r) && finalize_group!(r.comms)
    return nothing
end

"""
    DDP.withdevices(f, r::Replicas)

Runs `f(i, r[i])` for every copy at once, each on a task of its own (Conflux's
`withdevices`), and returns their results in order; a failure is rethrown once all have
ended. Let `f` compute (a forward and backward pass), and reduce afterwards from one
task with `allreduce!(op, r, xs...)`, as Conflux does. A collective called inside `f`
would wait for its peers inside a `ccall`, where Julia's garbage collector cannot stop
that thread: a peer task that then allocates waits for the collector, which waits for
the blocked thread, until the call's timeout (JuliaLang/julia#51574); and ranks sharing
a thread would wait for one another the same way.
"""
function withdevices(f, r::Replicas)
    tasks = [Threads.@spawn f(i, r[i]) for i in 1:length(r)]
    foreach(wait_quietly, tasks)
    return [fetch(task) for task in tasks]
end

"""Waits for `task` without throwing (its failure is rethrown by `fetch`)."""
function wait_quietly(task)
    try
        wait(task)
    catch
    end
end

"""
    allreduce!(op, r::Replicas, xs...; fusion_bytes = nothing, timeout_s = nothing)

Reduces `xs[i]` (copy `i`'s gradients: an array, or a tree of arrays; numbers in a tree
are left as they are) across the replicas with `op`, in place, from this one task
(Conflux's `allreduce!(avg, ∇models...)`): every rank's call is issued between
`ddp_group_start` and `ddp_group_end` and they run together, so one thread serves every
replica. Returns `xs`.
"""
function allreduce!(op::Union{Symbol, Function}, r::Replicas, xs...;
                    fusion_bytes = nothing, timeout_s = nothing)
    length(xs) == length(r) || throw(ArgumentError(
        "allreduce!: $(length(xs)) values for $(length(r)) replicas: pass one per replica"))
    calls = map(1:length(r)) do i
        prepared("allreduce", timeout_s) do
            code = op_code(op)
            opts = collective_options(fusion_bytes, timeout_s)
            arrays = tree_leaves(xs[i]).arrays
            tensors = LibDDP.ddp_tensor[tensor(x) for x in arrays]
            () -> GC.@preserve arrays tensors opts LibDDP.ddp_allreduce_tensor_list(
                r.comms[i].handle, tensors, length(tensors), code, opts)
        end
    end
    run_grouped(r, "allreduce", calls)
    return xs
end

"""
    synchronize!(r::Replicas; root = 1, fusion_bytes = nothing, timeout_s = nothing)

Copies the arrays of copy `root` into every other copy of `r`, in place, from this one
task (grouped, as `allreduce!(op, r, xs...)`), and returns `r`: after a step that
changed one copy only, or to make sure they start alike.
"""
function synchronize!(r::Replicas; root::Integer = 1, fusion_bytes = nothing, timeout_s = nothing)
    1 <= root <= length(r) || throw(ArgumentError("root = $root: a copy of 1:$(length(r))"))
    calls = map(1:length(r)) do i
        prepared("broadcast", timeout_s) do
            opts = collective_options(fusion_bytes, timeout_s)
            arrays = tree_leaves(r[i]).arrays
            tensors = LibDDP.ddp_tensor[tensor(x) for x in arrays]
            () -> GC.@preserve arrays tensors opts LibDDP.ddp_broadcast_tensor_list(
                r.comms[i].handle, tensors, length(tensors), Int32(root - 1), opts)
        end
    end
    run_grouped(r, "broadcast", calls)
    return r
end

"""
    prepared(make, collective, timeout_s)

One rank's part in a grouped `collective`: `make()`'s closure, which makes the ccall, or
the `ArgumentError` that refused this rank's arguments (its message to tell the peers),
with the options that carry the call's timeout. Everything that may allocate, throw or
yield happens here, before the group opens.
"""
function prepared(make, collective::AbstractString, timeout_s)
    try
        return make()
    catch error
        error isa ArgumentError || rethrow()
        return (refused = error, opts = refusal_options(timeout_s))
    end
end

"""
    run_grouped(r, collective, calls)

Issues every rank's prepared call between `ddp_group_start` and `ddp_group_end` on this
thread (libddp's group belongs to the calling thread, and nothing here yields): a refused
rank takes part through `ddp_report_invalid_call`, so that its peers fail naming it
instead of waiting. The group always ends; the first error is thrown.
"""
function run_grouped(r::Replicas, collective::AbstractString, calls)
    thread = Threads.threadid()
    check(LibDDP.ddp_group_start())
    # (status, libddp's message, whether this package refused the arguments), per rank
    outcomes = map(1:length(calls)) do i
        call = calls[i]
        if call isa Function
            status = call()
            status == LibDDP.DDP_OK && return (status, "", false)
            return (status, unsafe_string(LibDDP.ddp_last_error_message()), false)
        end
        LibDDP.ddp_report_invalid_call(r.comms[i].handle, collective, call.refused.msg, call.opts)
        return (LibDDP.DDP_ERR_INVALID_ARGUMENT, call.refused.msg, true)
    end
    ended = LibDDP.ddp_group_end()
    Threads.threadid() == thread || error("the task moved to another thread inside a libddp group")
    for (i, (status, message, refused)) in enumerate(outcomes)
        refused && throw(ArgumentError("replica $i: $message"))
        status == LibDDP.DDP_OK || throw(DDPError(status, message))
    end
    check(ended)
    return nothing
end
