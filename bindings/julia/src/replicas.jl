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
mutable struct Replicas{T} <: AbstractVector{T}
    copies::Vector{T}
    comms::Vector{Communicator}
    open::Bool
end

Base.size(r::Replicas) = size(r.copies)
Base.getindex(r::Replicas, i::Int) = r.copies[i]
Base.isopen(r::Replicas) = r.open

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
MPI; refused under `mpirun` (one group across processes is not built yet).

    DDP.replicate(x, devices::AbstractVector{<:Integer})

One copy per CUDA device: not built yet, refused with `DDP_ERR_UNSUPPORTED`.
"""
function replicate(x, n::Integer; timeout_s = 0.0)
    n isa Bool && throw(ArgumentError("n: expected the number of replicas, got $n"))
    comms = init_local(n, nothing, timeout_s)
    return finalizing(Replicas([deepcopy(x) for _ in 1:n], comms, true))
end

function replicate(x, devices::AbstractVector{<:Integer}; timeout_s = 0.0)
    comms = init_local(length(devices), Int32.(devices), timeout_s)
    return finalizing(Replicas([deepcopy(x) for _ in devices], comms, true))
end

"""
    init_local(n, devices, timeout_s)

`n` communicators of one in-process group (`ddp_init_local`); `devices` is `nothing` or
one CUDA device id per rank. libddp checks `n` and the options and names what is wrong.
"""
function init_local(n::Integer, devices, timeout_s)
    reason = seconds_error("timeout_s", timeout_s, "0: DDP_TIMEOUT_S, else 1800")
    reason === nothing || throw(ArgumentError(reason))
    typemin(Int32) <= n <= typemax(Int32) ||
        throw(ArgumentError("n = $n: a group has at most 4096 ranks"))
    opts = Ref{LibDDP.ddp_init_options}()
    check(LibDDP.ddp_init_options_init(opts, sizeof(LibDDP.ddp_init_options)))
    opts[] = LibDDP.ddp_init_options(opts[].struct_size, opts[].backend, opts[].mpi_comm_fortran,
                                     seconds(timeout_s), opts[].hang_watchdog_s)
    handles = fill(Ptr{LibDDP.ddp_comm}(C_NULL), max(Int(n), 1))  # libddp names a bad n itself
    ids = devices === nothing ? C_NULL : devices
    GC.@preserve devices check(LibDDP.ddp_init_local(Int32(n), ids, opts, handles))
    return [Communicator(handle) for handle in handles[1:n]]
end

"""Registers `r` to be closed at exit, and returns it."""
function finalizing(r::Replicas)
    atexit(() -> close(r))
    return r
end

"""
    close(r::Replicas)

Ends every rank of `r`'s group in turn (`ddp_finalize`, which waits for no peer).
Calling it again does nothing.
"""
function Base.close(r::Replicas)
    r.open || return nothing
    r.open = false
    foreach(comm -> check(LibDDP.ddp_finalize(comm.handle)), r.comms)
    return nothing
end

"""
    DDP.withdevices(f, r::Replicas)

Runs `f(i, r[i])` for every copy at once, each on a task of its own (Conflux's
`withdevices`), and returns their results in order; a failure is rethrown once all have
ended. For `f` to call collectives on its rank (`DDP.communicator(r, i)`), start Julia
with a thread per replica (`julia -t n`): a collective waits for every rank, so ranks
sharing a thread wait until their timeout. With fewer threads, reduce from one task
with `allreduce!(op, r, xs...)`.
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

Reduces `xs[i]` (copy `i`'s gradients: an array, or a tree of arrays) across the
replicas with `op`, in place, from this one task (Conflux's `allreduce!(avg, ∇models...)`):
the calls of every rank are grouped (`ddp_group_start`/`ddp_group_end`) and run
together, so one thread serves every replica. Returns `xs`.
"""
function allreduce!(op::Union{Symbol, Function}, r::Replicas, xs...;
                    fusion_bytes = nothing, timeout_s = nothing)
    length(xs) == length(r) || throw(ArgumentError(
        "allreduce!: $(length(xs)) values for $(length(r)) replicas: pass one per replica"))
    grouped(length(r)) do i
        allreduce_arrays!(tree_leaves(xs[i]).arrays, op, r.comms[i], fusion_bytes, timeout_s, nothing)
    end
    return xs
end

"""
    synchronize!(r::Replicas; root = 1)

Copies the arrays of copy `root` into every other copy of `r`, in place, from this one
task (grouped, as `allreduce!(op, r, xs...)`), and returns `r`: after a step that
changed one copy only, or to make sure they start alike.
"""
function synchronize!(r::Replicas; root::Integer = 1, fusion_bytes = nothing, timeout_s = nothing)
    1 <= root <= length(r) || throw(ArgumentError("root = $root: a copy of 1:$(length(r))"))
    grouped(length(r)) do i
        root_code, opts = refusing(r.comms[i], "broadcast", timeout_s) do
            Int32(root - 1), collective_options(fusion_bytes, timeout_s, nothing)
        end
        with_tensors(tree_leaves(r[i]).arrays, r.comms[i], "broadcast", opts) do tensors
            check(LibDDP.ddp_broadcast_tensor_list(r.comms[i].handle, tensors, length(tensors), root_code,
                                                   opts))
        end
    end
    return r
end

"""
    grouped(call, n)

Runs `call(i)` for every rank `i` in 1:n between `ddp_group_start` and
`ddp_group_end`, so that the blocking collectives they issue (one per rank of a local
group) run together at the end. A call that fails still leaves the others issued (a
refused call has taken part, and its peers must be started to hear it); the group
always ends, waiting for what started, and the first error is thrown.
"""
function grouped(call, n::Integer)
    check(LibDDP.ddp_group_start())
    failure = nothing
    for i in 1:n
        try
            call(i)
        catch error
            failure === nothing && (failure = error)
        end
    end
    ended = LibDDP.ddp_group_end()
    failure === nothing || throw(failure)
    check(ended)
    return nothing
end
