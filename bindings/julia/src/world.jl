# The world communicator: starting and ending it, and who this process is.

"""
    Communicator

A libddp process group (`ddp_comm*`). `DDP.Init()` makes the world one; every
collective takes it as its last, optional argument (default `DDP.world()`).
"""
struct Communicator
    handle::Ptr{LibDDP.ddp_comm}
end

const WORLD = Ref{Union{Nothing, Communicator}}(nothing)

"""
Functions of the world `Communicator` that `DDP.Init()` calls once it exists: the CUDA
extension's, which makes the rank's GPU (`DDP.device()`) CUDA.jl's current device.
"""
const INIT_HOOKS = Any[]

const BACKENDS = Dict(:auto => LibDDP.DDP_BACKEND_AUTO, :self => LibDDP.DDP_BACKEND_SELF,
                      :mpi => LibDDP.DDP_BACKEND_MPI, :nccl => LibDDP.DDP_BACKEND_NCCL)

"""
    DDP.Init(; backend = :auto, mpi_comm_fortran = -1, timeout_s = 0.0, hang_watchdog_s = 0.0,
             verbose = false)

Starts libddp (as `FluxMPI.Init()` / `DistributedUtils.initialize(MPIBackend)`): MPI
under `mpiexec` (initialized by libddp unless it already is), else one process.
Collective. `backend` is `:auto`, `:self`, `:mpi` or `:nccl`; `mpi_comm_fortran` adopts
an existing MPI communicator's Fortran handle (with MPI.jl loaded, pass the
`MPI.Comm` itself: `DDP.Init(MPI.COMM_WORLD)`); `timeout_s` 0 means `DDP_TIMEOUT_S`,
else 1800 s. `hang_watchdog_s`: seconds past a call's deadline that its thread may stay
inside MPI before the hang watchdog aborts the process with a message naming the call,
so that the launcher ends the job (0: `DDP_HANG_WATCHDOG_S`, else 60; negative: off).
Both mean what they mean in C (`ddp_init_options`): libddp checks their values (a
negative, NaN or infinite timeout, a NaN or infinite grace: a `DDPError` with its
message); one that is no number of seconds (a `String`, a `Bool`) is an `ArgumentError`.
A second call while initialized returns the same world. Returns the
world `Communicator`; libddp is finalized at exit.
"""
function Init(; backend::Symbol = :auto, mpi_comm_fortran::Integer = LibDDP.DDP_NO_MPI_COMM,
              timeout_s = 0.0, hang_watchdog_s = 0.0, verbose::Bool = false)
    Initialized() && return WORLD[]
    haskey(BACKENDS, backend) || throw(ArgumentError(
        "backend :$backend: use :auto, :self, :mpi or :nccl"))
    for reason in (seconds_error("timeout_s", timeout_s, "0: DDP_TIMEOUT_S, else 1800"),
                   seconds_error("hang_watchdog_s", hang_watchdog_s,
                                 "0: DDP_HANG_WATCHDOG_S, else 60; negative: off"))
        reason === nothing || throw(ArgumentError(reason))
    end
    opts = Ref{LibDDP.ddp_init_options}()
    check(LibDDP.ddp_init_options_init(opts, sizeof(LibDDP.ddp_init_options)))
    opts[] = LibDDP.ddp_init_options(opts[].struct_size, BACKENDS[backend],
                                     Int64(mpi_comm_fortran), seconds(timeout_s),
                                     seconds(hang_watchdog_s))
    handle = Ref{Ptr{LibDDP.ddp_comm}}(C_NULL)
    check(LibDDP.ddp_init(opts, handle))
    WORLD[] = Communicator(handle[])
    TIMELINE_RECORDING[] = !isempty(get(ENV, "DDP_TIMELINE", ""))  # ddp_init started it
    atexit(Finalize)
    foreach(hook -> hook(WORLD[]), INIT_HOOKS)
    verbose && ddp_println("DDP initialized: rank ", local_rank(), " of ", total_workers())
    return WORLD[]
end

"""
    DDP.Initialized()

Whether `DDP.Init()` has run and `DDP.Finalize()` has not (`FluxMPI.Initialized()`).
"""
Initialized() = WORLD[] !== nothing

"""
    DDP.Finalize()

Ends the world communicator (and MPI, if libddp started it) after its async requests
finish. Collective. Does nothing when not initialized, so calling it twice is fine.
"""
function Finalize()
    Initialized() || return nothing
    handle = WORLD[].handle
    WORLD[] = nothing
    TIMELINE_RECORDING[] = false
    check(LibDDP.ddp_finalize(handle))
    return nothing
end

"""
    DDP.world()

The world `Communicator`; a `DDPError` (`DDP_ERR_NOT_INITIALIZED`) before `DDP.Init()`.
"""
function world()
    Initialized() || throw(DDPError(LibDDP.DDP_ERR_NOT_INITIALIZED,
                                    "DDP.Init() has not been called (or DDP.Finalize() has)"))
    return WORLD[]
end

"""
    local_rank(comm = DDP.world())

This process's rank, 0-based, as FluxMPI's and DistributedUtils' `local_rank`: despite
the name, its rank among all processes (libddp assigns each process its GPU by its
rank on the node itself).
"""
function local_rank(comm::Communicator = world())
    rank = Ref{Int32}(0)
    check(LibDDP.ddp_rank(comm.handle, rank))
    return Int(rank[])
end

"""
    total_workers(comm = DDP.world())

The number of processes (FluxMPI's and DistributedUtils' `total_workers`).
"""
function total_workers(comm::Communicator = world())
    size = Ref{Int32}(0)
    check(LibDDP.ddp_size(comm.handle, size))
    return Int(size[])
end

"""
    DDP.device(comm = DDP.world())

The CUDA device libddp assigned this rank (`ddp_device`: node-local rank modulo the
node's GPU count, made current at `DDP.Init()`), 0-based as `CUDA.device!` takes it;
-1 when the node has no GPU (or libddp was built without CUDA). With CUDA.jl loaded,
`DDP.Init()` calls `CUDA.device!(DDP.device())` itself.
"""
function device(comm::Communicator = world())
    id = Ref{Int32}(0)
    check(LibDDP.ddp_device(comm.handle, id))
    return Int(id[])
end

"""
    DDP.node_local_rank(comm = DDP.world())

This process's rank among the ranks on its node, 0-based (`ddp_local_rank`); what
FluxMPI's `local_rank` is not: that one is the rank in the world.
"""
function node_local_rank(comm::Communicator = world())
    rank = Ref{Int32}(0)
    check(LibDDP.ddp_local_rank(comm.handle, rank))
    return Int(rank[])
end

"""
    DDP.node_local_size(comm = DDP.world())

The number of ranks on this process's node (`ddp_local_size`).
"""
function node_local_size(comm::Communicator = world())
    size = Ref{Int32}(0)
    check(LibDDP.ddp_local_size(comm.handle, size))
    return Int(size[])
end

"""
Writes the `libddp_path` preference: `nothing` until the Preferences extension sets
it, since the core package loads without Preferences.jl.
"""
const PREFERENCE_WRITER = Ref{Any}(nothing)

"""
    DDP.set_libddp_path!(path)

Makes this project use the libddp at `path` from the next Julia session on: writes the
`libddp_path` preference to LocalPreferences.toml (the way JLL packages are overridden).
`DDP_LIBRARY` wins over it, it wins over the system library; `nothing` removes it.
Needs Preferences.jl loaded (`using Preferences`, Julia 1.9+); reading the preference does
not (Julia 1.6+).
"""
function set_libddp_path!(path::Union{Nothing, AbstractString})
    writer = PREFERENCE_WRITER[]
    writer === nothing && throw(ArgumentError(
        "DDP.set_libddp_path! writes LocalPreferences.toml through Preferences.jl: " *
        "`using Preferences` first (its extension needs Julia 1.9 or later), " *
        "or write `libddp_path = \"...\"` under [DDP] by hand"))
    writer(path)
    return path
end
