# Sub-communicators: DDP.split, DDP.split_node, and close to release them.
#
# A sub-communicator is a `Communicator` like the world, so every collective takes it
# as its `comm` argument. It is released with `close`, never by a finalizer:
# `ddp_comm_free` is collective over its ranks, and ranks collect garbage at different
# moments, so a finalizer that freed it would leave peers waiting. One that is dropped
# unclosed stays live in libddp until `DDP.Finalize()`, which frees it with the world.
# Its handle stays valid memory after either (libddp keeps a freed handle's bytes), so a
# call on it throws a `DDPError` (`DDP_ERR_NOT_INITIALIZED`) instead of crashing.

"""
    DDP.split(comm, color; key = 0, timeout_s = nothing)
    DDP.split(f, comm, color; key = 0, timeout_s = nothing)

Splits `comm` as `MPI_Comm_split`: the ranks passing the same `color` (an integer ≥ 0)
form one sub-communicator, ranked by `key` (ties: by their rank in `comm`), which is
returned; a rank passing `color = nothing` (or -1, C's `DDP_COLOR_UNDEFINED`) joins none
and gets `nothing`. `timeout_s`: seconds for the sub-communicator's collectives
(`nothing` or 0: `comm`'s; as every timeout, a finite number ≥ 0, checked by libddp as
for C); the split itself is a collective on `comm`, held to `comm`'s timeout. Every
collective takes the result as its `comm`; release it with `close`. The `do`-block
form passes it to `f` and closes it afterwards, also when `f` throws
(`DDP.split(comm, color) do sub ... end`).

A bad `color` (negative other than -1, not an integer, beyond `Int32`), `key` or
`timeout_s` (negative, NaN, infinite, or not a number) on one rank throws a `DDPError`
(`DDP_ERR_INVALID_ARGUMENT`) there and one naming that rank (`DDP_ERR_MISMATCH`) on
every peer, at once; a bad value is refused by libddp with its message, as for C.
Collective.
"""
function split(comm::Communicator, color; key = 0, timeout_s = nothing)
    reason = split_argument_error(color, key, timeout_s)
    reason === nothing || refuse(comm, "comm_split", reason)
    opts = split_options(timeout_s)
    color_code = color === nothing ? Int32(LibDDP.DDP_COLOR_UNDEFINED) : Int32(color)
    handle = Ref{Ptr{LibDDP.ddp_comm}}(C_NULL)
    check(LibDDP.ddp_comm_split(comm.handle, color_code, Int32(key), opts, handle))
    return handle[] == C_NULL ? nothing : Communicator(handle[])
end

split(f, comm::Communicator, color; key = 0, timeout_s = nothing) =
    closing(f, split(comm, color; key = key, timeout_s = timeout_s))

"""
    DDP.split_node(comm = DDP.world(); timeout_s = nothing)
    DDP.split_node(f, comm = DDP.world(); timeout_s = nothing)

The ranks of `comm` on this rank's node (shared memory), ranked as in `comm`, as a
sub-communicator: for hierarchical work (reduce within the node, then across nodes).
Every rank gets one. Collective; `timeout_s` and the `do`-block form as `DDP.split`'s.
"""
function split_node(comm::Communicator = world(); timeout_s = nothing)
    reason = timeout_error(timeout_s, "the parent's timeout")
    reason === nothing || refuse(comm, "comm_split_node", reason)
    handle = Ref{Ptr{LibDDP.ddp_comm}}(C_NULL)
    check(LibDDP.ddp_comm_split_node(comm.handle, split_options(timeout_s), handle))
    return Communicator(handle[])
end

split_node(f::Function, comm::Communicator = world(); timeout_s = nothing) =
    closing(f, split_node(comm; timeout_s = timeout_s))

"""
    close(sub::DDP.Communicator)

Releases a sub-communicator from `DDP.split` or `DDP.split_node` after its async
requests finish (`ddp_comm_free`, collective over its ranks, as `MPI_Comm_free`).
Closing it again does nothing. The world is ended with `DDP.Finalize()` instead, which
also closes every sub-communicator still open.
"""
function Base.close(comm::Communicator)
    Initialized() && comm === world() && throw(DDPError(LibDDP.DDP_ERR_INVALID_ARGUMENT,
        "close(DDP.world()): the world is ended with DDP.Finalize(), which also closes its sub-communicators"))
    check(LibDDP.ddp_comm_free(comm.handle))
    return nothing
end

"""
    isopen(comm::DDP.Communicator)

Whether `comm` can still be used: `false` once it was closed, or once its world was
finalized.
"""
Base.isopen(comm::Communicator) = LibDDP.ddp_rank(comm.handle, Ref{Int32}(0)) == LibDDP.DDP_OK

"""`f(sub)`, then `close(sub)` (also when `f` throws); `f(nothing)` for a rank in none."""
function closing(f, sub::Union{Nothing, Communicator})
    sub === nothing && return f(nothing)
    try
        return f(sub)
    finally
        close(sub)
    end
end

"""What is wrong with `DDP.split`'s arguments, or `nothing`."""
function split_argument_error(color, key, timeout_s)
    # What an Int32 needs; the value is libddp's to check, as for a C caller (≥ 0, or
    # DDP_COLOR_UNDEFINED, -1, as `nothing`): ddp_comm_split refuses another negative
    # one with its own message, telling the peers first.
    if color !== nothing && !(color isa Integer && !(color isa Bool) && typemin(Int32) <= color <= typemax(Int32))
        return "color $(repr(color)): expected an integer ≥ 0 that fits in 32 bits, " *
               "or nothing to join no sub-communicator"
    end
    if !(key isa Integer && !(key isa Bool) && typemin(Int32) <= key <= typemax(Int32))
        return "key $(repr(key)): expected an integer that fits in 32 bits (ranks are ordered by it)"
    end
    return timeout_error(timeout_s, "the parent's timeout")
end

"""`ddp_split_options` with `timeout_s` (`nothing` or 0: libddp's default, the parent's)."""
function split_options(timeout_s)
    opts = Ref{LibDDP.ddp_split_options}()
    check(LibDDP.ddp_split_options_init(opts, sizeof(LibDDP.ddp_split_options)))
    timeout_s === nothing && return opts
    opts[] = LibDDP.ddp_split_options(opts[].struct_size, seconds(timeout_s))
    return opts
end
