# FluxMPI's collectives on arrays, and the barrier and replica check, in place.

"""
    allreduce!(v, op = +, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Reduces `v` in place across all ranks with `op` (`+`, `*`, `min`, `max`, or `:sum`,
`:prod`, `:min`, `:max`, `:avg`) and returns it; afterwards every rank holds the same
result. `v` is an array, or a `Tuple`/`NamedTuple`/`Vector` of arrays reduced in one call
(small ones fused; while a `timeline` records, named by field name or 1-based index). The op defaults to SUM; averaging is asked for by name (`:avg`).
`fusion_bytes` (-1: no fusion) and `timeout_s` override libddp's defaults for this call.
Ranks that pass different shapes, element types, ops or list lengths all get a
`DDPError` with status `DDP_ERR_MISMATCH`.
"""
function allreduce!(v, op = +, comm::Communicator = world();
                    fusion_bytes = nothing, timeout_s = nothing)
    code, arrays = op_code(op), array_list(v)
    allreduce_arrays!(arrays, code, comm, fusion_bytes, timeout_s, list_names(v, arrays))
    return v
end

"""
    allreduce_arrays!(arrays, code, comm, fusion_bytes, timeout_s, names)

One `ddp_allreduce_tensor_list` on `arrays` with op `code`, its tensors named by
`names` (`LeafNames`, or `nothing`).
"""
function allreduce_arrays!(arrays, code, comm::Communicator, fusion_bytes, timeout_s,
                           names::Union{Nothing, LeafNames})
    opts = collective_options(fusion_bytes, timeout_s, names)
    GC.@preserve names begin
        with_tensors(arrays) do tensors
            check(LibDDP.ddp_allreduce_tensor_list(comm.handle, tensors, length(tensors), code,
                                                   opts))
        end
    end
    return arrays
end

"""
    Request

An `Iallreduce!` in flight. `wait(request)` blocks until it completes and throws its
`DDPError` if it failed; `DDP.isdone(request)` asks without blocking. The arrays stay
referenced (so alive) until the request is freed.
"""
mutable struct Request
    handle::Ptr{LibDDP.ddp_request}
    arrays::Any
    function Request(handle::Ptr{LibDDP.ddp_request}, arrays)
        return finalizer(free_when_done, new(handle, arrays))
    end
end

"""
    free_when_done(request)

The `Request` finalizer. It never blocks: `ddp_request_free` waits for a request
still in flight (on peers that may not have joined yet), and a finalizer runs inside
the garbage collector, where waiting would stall every task. So a request that has
not completed stays registered, its arrays alive, and is freed by a later collection.
"""
function free_when_done(request::Request)
    done = Ref{Int32}(0)
    LibDDP.ddp_request_test(request.handle, done)  # its error went to `wait`, or to no one
    if done[] == 1
        LibDDP.ddp_request_free(request.handle)
    else
        finalizer(free_when_done, request)
    end
    return nothing
end

"""
    Iallreduce!(v, op = +, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Starts `allreduce!(v, op)` and returns `(v, request)` at once, as `FluxMPI.Iallreduce!`
does; libddp's background thread reduces while Julia computes. Leave `v` untouched
until `wait(request)`. Argument errors are thrown here, errors of the reduction itself
(mismatch, timeout) by `wait`.
"""
function Iallreduce!(v, op = +, comm::Communicator = world();
                     fusion_bytes = nothing, timeout_s = nothing)
    code, arrays = op_code(op), array_list(v)
    names = list_names(v, arrays)  # libddp copies them before it returns
    opts = collective_options(fusion_bytes, timeout_s, names)
    handle = Ref{Ptr{LibDDP.ddp_request}}(C_NULL)
    GC.@preserve names begin
        with_tensors(arrays) do tensors
            check(LibDDP.ddp_allreduce_tensor_list_async(comm.handle, tensors, length(tensors),
                                                         code, opts, handle))
        end
    end
    return v, Request(handle[], arrays)
end

"""
    wait(request::DDP.Request)

Blocks until the `Iallreduce!` completes; throws its `DDPError` if it failed.
"""
Base.wait(request::Request) = check(LibDDP.ddp_request_wait(request.handle))

"""
    DDP.isdone(request)

Whether the `Iallreduce!` has completed, without blocking; throws its `DDPError` if it
completed with one.
"""
function isdone(request::Request)
    done = Ref{Int32}(0)
    check(LibDDP.ddp_request_test(request.handle, done))
    return done[] == 1
end

"""
    bcast!(v, root = 0, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Copies rank `root`'s `v` (an array, or a `Tuple`/`Vector` of arrays) into every other
rank's `v` in place and returns it (`FluxMPI.bcast!`). `root` is 0-based, as ranks are.
"""
function bcast!(v, root::Integer = 0, comm::Communicator = world();
                fusion_bytes = nothing, timeout_s = nothing)
    arrays = array_list(v)
    names = list_names(v, arrays)
    opts = collective_options(fusion_bytes, timeout_s, names)
    GC.@preserve names begin
        with_tensors(arrays) do tensors
            check(LibDDP.ddp_broadcast_tensor_list(comm.handle, tensors, length(tensors), root,
                                                   opts))
        end
    end
    return v
end

"""
    reduce!(v, op = +, root = 0, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Reduces every rank's `v` with `op` into rank `root`'s `v` (`FluxMPI.reduce!`); the
other ranks' `v` are left unchanged. Returns `v`.
"""
function reduce!(v, op = +, root::Integer = 0, comm::Communicator = world();
                 fusion_bytes = nothing, timeout_s = nothing)
    code, arrays = op_code(op), array_list(v)
    names = list_names(v, arrays)
    opts = collective_options(fusion_bytes, timeout_s, names)
    GC.@preserve names begin
        with_tensors(arrays) do tensors
            check(LibDDP.ddp_reduce_tensor_list(comm.handle, tensors, length(tensors), code, root,
                                                opts))
        end
    end
    return v
end

"""
    barrier(comm = DDP.world(); timeout_s = nothing)

Returns when every rank has called it.
"""
function barrier(comm::Communicator = world(); timeout_s = nothing)
    check(LibDDP.ddp_barrier(comm.handle, collective_options(nothing, timeout_s)))
    return nothing
end

"""
    check_replicas(ps, comm = DDP.world())

Whether every array of the tree `ps` (parameters: nested `NamedTuple`s, `Tuple`s,
arrays) holds the same bytes on every rank. Collective; on `false` it warns with
libddp's message naming the first differing array and two ranks that differ.
"""
function check_replicas(ps, comm::Communicator = world())
    leaves = tree_leaves(ps)
    identical = Ref{Int32}(0)
    with_tensors(leaves.arrays) do tensors
        check(LibDDP.ddp_check_replicas(comm.handle, tensors, length(tensors), C_NULL, identical))
    end
    identical[] == 1 && return true
    @warn without_finalizers(() -> unsafe_string(LibDDP.ddp_last_error_message()))
    return false
end
