# FluxMPI's collectives on arrays, and the barrier and replica check, in place.

"""
    refusing(f, comm, collective, timeout_s = nothing)

Returns `f()`, which turns a collective's arguments into what libddp takes (its op,
its options). An `ArgumentError` from it is this rank's refusal of the call: reported
to the peers first (`refuse`, as `collective`), so that their call fails at once with
`DDP_ERR_MISMATCH` naming this rank and the reason instead of waiting for it until
their timeout, and thrown here as a `DDPError` (`DDP_ERR_INVALID_ARGUMENT`), as libddp
does when it refuses a value itself. `timeout_s` holds the report to the call's own
timeout where that one is valid.
"""
function refusing(f, comm::Communicator, collective::AbstractString, timeout_s = nothing)
    reason = try
        return f()
    catch error
        error isa ArgumentError || rethrow()
        error.msg
    end
    refuse(comm, collective, reason, refusal_options(timeout_s))
end

"""
    refusal_options(timeout_s)

The options that hold a refusal's report to the call's own timeout; `C_NULL` (the
communicator's) when that timeout is itself the bad argument.
"""
function refusal_options(timeout_s)
    try
        return collective_options(nothing, timeout_s)
    catch error
        error isa ArgumentError || rethrow()
        return C_NULL
    end
end

"""
    refuse(comm, collective, reason, opts = C_NULL)

Takes part in `collective` on `comm` as a rank with invalid arguments
(`ddp_report_invalid_call`, held to the timeout of `opts`), so that the peers fail at
once naming this rank, then throws this rank's `DDPError` (`DDP_ERR_INVALID_ARGUMENT`).
"""
function refuse(comm::Communicator, collective::AbstractString, reason::AbstractString,
                opts = C_NULL)
    # Its own failure (a finalized or broken comm) leaves the argument error to report.
    LibDDP.ddp_report_invalid_call(comm.handle, collective, reason, opts)
    throw(DDPError(LibDDP.DDP_ERR_INVALID_ARGUMENT, "rank $(local_rank(comm)): $reason"))
end

"""
    with_tensors(f, arrays, comm, collective, opts)

Calls `f(tensors::Vector{ddp_tensor})` with `arrays` kept alive for the duration, as
this rank's part in `collective` on `comm`: an array
libddp cannot take (`tensor`'s `ArgumentError`: not contiguous, an element type
without a libddp dtype, not host memory) is reported to the peers first
(`ddp_report_invalid_call`, held to the timeout of `opts`), so that their call fails
at once with `DDP_ERR_MISMATCH` naming this rank and the reason instead of waiting for
it until their timeout, and the `ArgumentError` is then thrown here, as ever.
"""
function with_tensors(f, arrays, comm::Communicator, collective::AbstractString, opts)
    tensors = try
        LibDDP.ddp_tensor[tensor(x) for x in arrays]
    catch error
        error isa ArgumentError || rethrow()
        # Its own failure (a finalized or broken comm) leaves the argument error to report.
        LibDDP.ddp_report_invalid_call(comm.handle, collective, error.msg, opts)
        rethrow()
    end
    result = GC.@preserve arrays tensors f(tensors)
    return result
end

"""
    rank_code(name, rank)

`rank` (argument `name`: a root) as the `int32_t` libddp takes; an `ArgumentError`
(refused by `refusing`, so the peers fail at once) when it is not an integer that fits
one (`1.5`, `true`). Its value is libddp's to check, as for a C caller (a rank of the
communicator).
"""
function rank_code(name, rank)
    rank isa Integer && !(rank isa Bool) && typemin(Int32) <= rank <= typemax(Int32) && return Int32(rank)
    throw(ArgumentError("$name $(repr(rank)): expected a rank, an integer that fits in 32 bits"))
end

"""
    allreduce!(v, op = +, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Reduces `v` in place across all ranks with `op` (`+`, `*`, `min`, `max`, or `:sum`,
`:prod`, `:min`, `:max`, `:avg`) and returns it; afterwards every rank holds the same
result. `v` is an array, or a `Tuple`/`NamedTuple`/`Vector` of arrays reduced in one call
(small ones fused; while a `timeline` records, named by field name or 1-based index). The op defaults to SUM; averaging is asked for by name (`:avg`).
`fusion_bytes` (-1: no fusion) and `timeout_s` (seconds; 0: the communicator's, as in C)
override libddp's defaults for this call.
Ranks that pass different shapes, element types, ops or list lengths all get a
`DDPError` with status `DDP_ERR_MISMATCH`.
"""
function allreduce!(v, op = +, comm::Communicator = world();
                    fusion_bytes = nothing, timeout_s = nothing)
    arrays = array_list(v)
    naming_tensors(v) do
        allreduce_arrays!(arrays, op, comm, fusion_bytes, timeout_s, list_names(v, arrays))
    end
    return v
end

"""
    allreduce_arrays!(arrays, op, comm, fusion_bytes, timeout_s, names)

One `ddp_allreduce_tensor_list` on `arrays` with `op`, its tensors named by `names`
(`LeafNames`, or `nothing`). A bad `op`, or options of a kind libddp cannot be given,
fail every rank's call at once (`refusing`).
"""
function allreduce_arrays!(arrays, op, comm::Communicator, fusion_bytes, timeout_s,
                           names::Union{Nothing, LeafNames})
    code, opts = refusing(comm, "allreduce", timeout_s) do
        op_code(op), collective_options(fusion_bytes, timeout_s, names)
    end
    GC.@preserve names begin
        with_tensors(arrays, comm, "allreduce", opts) do tensors
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
until `wait(request)`. Argument errors are thrown here (a bad `op` or timeout on one
rank, as `allreduce!`'s, failing the peers' call at once), errors of the reduction
itself (mismatch, timeout) by `wait`.
"""
function Iallreduce!(v, op = +, comm::Communicator = world();
                     fusion_bytes = nothing, timeout_s = nothing)
    arrays = array_list(v)
    names = list_names(v, arrays)  # libddp copies them before it returns
    code, opts = refusing(comm, "allreduce", timeout_s) do
        op_code(op), collective_options(fusion_bytes, timeout_s, names)
    end
    handle = Ref{Ptr{LibDDP.ddp_request}}(C_NULL)
    GC.@preserve names begin
        with_tensors(arrays, comm, "allreduce", opts) do tensors
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
function bcast!(v, root::Number = 0, comm::Communicator = world();
                fusion_bytes = nothing, timeout_s = nothing)
    arrays = array_list(v)
    names = list_names(v, arrays)
    root_code, opts = refusing(comm, "broadcast", timeout_s) do
        rank_code("root", root), collective_options(fusion_bytes, timeout_s, names)
    end
    GC.@preserve names begin
        with_tensors(arrays, comm, "broadcast", opts) do tensors
            check(LibDDP.ddp_broadcast_tensor_list(comm.handle, tensors, length(tensors), root_code,
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
function reduce!(v, op = +, root::Number = 0, comm::Communicator = world();
                 fusion_bytes = nothing, timeout_s = nothing)
    arrays = array_list(v)
    names = list_names(v, arrays)
    code, root_code, opts = refusing(comm, "reduce", timeout_s) do
        op_code(op), rank_code("root", root), collective_options(fusion_bytes, timeout_s, names)
    end
    GC.@preserve names begin
        with_tensors(arrays, comm, "reduce", opts) do tensors
            check(LibDDP.ddp_reduce_tensor_list(comm.handle, tensors, length(tensors), code,
                                                root_code, opts))
        end
    end
    return v
end

"""
    allgather!(out, v, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Gathers every rank's `v` into every rank's `out` and returns `out` (the parameter half
of ZeRO and FSDP). The ranks' arrays are concatenated along the last dimension, in rank
order: for `v` of size `(m, n)`, `out` has size `(m, total_workers() * n)` and
`out[:, r*n+1:(r+1)*n]` is rank `r`'s `v` (one contiguous block per rank, as Julia
arrays are column-major; a vector of length `n` gathers into `total_workers() * n`).
`v` and `out` are arrays, or `Tuple`s/`NamedTuple`s/`Vector`s of as many arrays paired
in order (gathered in one call, small ones fused), of equal element types. An `out` of
another size is a `DDPError` (`DDP_ERR_INVALID_ARGUMENT` naming it) on this rank and
`DDP_ERR_MISMATCH` naming this rank on the others, at once.
"""
function allgather!(out, v, comm::Communicator = world();
                    fusion_bytes = nothing, timeout_s = nothing)
    call(handle, inputs, outputs, n, opts) =
        LibDDP.ddp_allgather_tensor_list(handle, inputs, outputs, n, opts)
    sharded_call!(call, "allgather", out, v, comm, fusion_bytes, timeout_s, gathered_size)
    return out
end

"""
    reduce_scatter!(out, v, op = +, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Reduces every rank's `v` with `op` (as `allreduce!` takes it) and leaves this rank's
share of the result in `out`, returning it (the gradient half of ZeRO and FSDP): the
reduction is split along the last dimension into `total_workers()` equal blocks, and
rank `r` gets block `r`, so for `v` of size `(m, n)` `out` has size
`(m, n ÷ total_workers())`; `allgather!` puts the blocks back together. `v` is only
read. Lists and errors as `allgather!`; a last dimension that is not a multiple of the
number of ranks is a `DDPError` (`DDP_ERR_INVALID_ARGUMENT`) naming the array.
"""
function reduce_scatter!(out, v, op = +, comm::Communicator = world();
                         fusion_bytes = nothing, timeout_s = nothing)
    code = refusing(() -> op_code(op), comm, "reduce_scatter", timeout_s)
    call(handle, inputs, outputs, n, opts) =
        LibDDP.ddp_reduce_scatter_tensor_list(handle, inputs, outputs, n, code, opts)
    sharded_call!(call, "reduce_scatter", out, v, comm, fusion_bytes, timeout_s, scattered_size)
    return out
end

"""
    alltoall!(out, v, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

Exchanges blocks of `v` between every pair of ranks and returns `out` (the token
exchange of mixture-of-experts layers; `MPI.Alltoall!`, torch's `all_to_all_single`):
`v` is `total_workers()` equal blocks of `length(v) ÷ total_workers()` elements in
memory order (whole columns, split along the last dimension as `reduce_scatter!`
splits, when it is a multiple of the number of ranks); block `j` (0-based) goes to
rank `j`, and block `r` of `out` receives rank `r`'s block for this rank, in rank
order. `out` has `v`'s size and element type; `v` is only read and must not overlap
`out`. Lists and errors as `allgather!`; a length that is not a multiple of the number
of ranks is libddp's `DDPError` (`DDP_ERR_INVALID_ARGUMENT`) naming the array
(`inputs[0]`), on this rank, and `DDP_ERR_MISMATCH` naming it on the others, at once.
"""
function alltoall!(out, v, comm::Communicator = world();
                   fusion_bytes = nothing, timeout_s = nothing)
    call(handle, inputs, outputs, n, opts) =
        LibDDP.ddp_alltoall_tensor_list(handle, inputs, outputs, n, opts)
    sharded_call!(call, "alltoall", out, v, comm, fusion_bytes, timeout_s, exchanged_size)
    return out
end

"""
    allgather(v, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

`allgather!` into new arrays: an array, or a list of the same kind as `v`.
"""
allgather(v, comm::Communicator = world(); kwargs...) =
    allgather!(similar_list(v, gathered_size, total_workers(comm)), v, comm; kwargs...)

"""
    reduce_scatter(v, op = +, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

`reduce_scatter!` into new arrays: an array, or a list of the same kind as `v`.
"""
reduce_scatter(v, op = +, comm::Communicator = world(); kwargs...) =
    reduce_scatter!(similar_list(v, scattered_size, total_workers(comm)), v, op, comm; kwargs...)

"""
    alltoall(v, comm = DDP.world(); fusion_bytes = nothing, timeout_s = nothing)

`alltoall!` into new arrays: an array, or a list of the same kind as `v`.
"""
alltoall(v, comm::Communicator = world(); kwargs...) =
    alltoall!(similar_list(v, exchanged_size, total_workers(comm)), v, comm; kwargs...)

"""
    leading_and_last(x)

The size of `x` as its leading dimensions and its last extent (a 0-dimensional
array counts as a vector of one), the dimension that `allgather!` and
`reduce_scatter!` concatenate and split: contiguous per rank in column-major order.
"""
leading_and_last(x) = ndims(x) == 0 ? ((), 1) : (Base.front(size(x)), size(x)[end])

"""The size `allgather!` gathers `x` into from `ranks` ranks."""
function gathered_size(x, ranks)
    leading, last = leading_and_last(x)
    return (leading..., last * ranks)
end

"""The size of `reduce_scatter!`'s share of `x` on `ranks` ranks, or why it has none."""
function scattered_size(x, ranks)
    leading, last = leading_and_last(x)
    last % ranks == 0 || return "its last dimension ($last) is not a multiple of the " *
        "$ranks ranks it is split between (pad it to $(cld(last, ranks) * ranks))"
    return (leading..., last ÷ ranks)
end

"""The size of `alltoall!`'s result for `x`: `x`'s own (whether its length splits into
equal blocks is libddp's to check)."""
exchanged_size(x, ranks) = size(x)

"""
    similar_list(v, expected_size, ranks)

Arrays like those of `v` (the same kind of list) of the sizes `expected_size` gives;
an empty one where it gives a reason instead, which the call then refuses naming it.
"""
similar_list(v::AbstractArray{<:Number}, expected_size, ranks) =
    similar_array(v, expected_size(v, ranks))
similar_list(v, expected_size, ranks) = map(x -> similar_array(x, expected_size(x, ranks)), v)
similar_array(x, size::Tuple) = similar(x, size)
similar_array(x, reason::String) = similar(x, 0)

"""
    array_name(v, i, what)

How a message names array `i` of `array_list(v)`: `what` for a single array, else
`what` with the field name (`out.weight`) or 1-based index (`out[2]`).
"""
array_name(::AbstractArray{<:Number}, i, what) = what
array_name(v::NamedTuple, i, what) = string(what, '.', keys(v)[i])
array_name(v, i, what) = string(what, '[', i, ']')

"""
    shape_error(out, outputs, v, inputs, ranks, expected_size)

Why `outputs` cannot take the result of `inputs` (lists of other lengths, an input
`expected_size` refuses, an output of another size than it gives), or `nothing`.
"""
function shape_error(out, outputs, v, inputs, ranks, expected_size)
    length(outputs) == length(inputs) || return "$(length(inputs)) input arrays for " *
        "$(length(outputs)) output arrays; they pair up one to one"
    for (i, (y, x)) in enumerate(zip(outputs, inputs))
        want = expected_size(x, ranks)
        want isa String && return "$(array_name(v, i, "v")): $want"
        size(y) == want || return "$(array_name(out, i, "out")) has size $(size(y)), " *
            "not the $want that $(array_name(v, i, "v")) of size $(size(x)) needs on $ranks ranks"
    end
    return nothing
end

"""
    sharded_call!(call, collective, out, v, comm, fusion_bytes, timeout_s, expected_size)

One `call(handle, inputs, outputs, n, opts)` (`ddp_allgather_tensor_list`, ...) from
the arrays of `v` into those of `out`. libddp checks counts only, so the sizes
(`expected_size`) are checked here; a refused call (those sizes, options of a kind
libddp cannot be given, an array libddp cannot take) is reported to the peers first
(`refuse`, `with_tensors`, as `collective`), so that theirs fails at once naming this
rank instead of waiting for it.
"""
function sharded_call!(call, collective, out, v, comm::Communicator, fusion_bytes, timeout_s,
                       expected_size)
    inputs, outputs = array_list(v), array_list(out)
    names = list_names(v, inputs)
    opts = refusing(() -> collective_options(fusion_bytes, timeout_s, names), comm, collective,
                    timeout_s)
    reason = shape_error(out, outputs, v, inputs, total_workers(comm), expected_size)
    reason === nothing || refuse(comm, collective, reason, opts)
    GC.@preserve names begin
        with_tensors(inputs, comm, collective, opts) do input_tensors
            with_tensors(outputs, comm, collective, opts) do output_tensors
                check(call(comm.handle, input_tensors, output_tensors, length(input_tensors), opts))
            end
        end
    end
    return nothing
end

"""
    barrier(comm = DDP.world(); timeout_s = nothing)

Returns when every rank has called it.
"""
function barrier(comm::Communicator = world(); timeout_s = nothing)
    opts = refusing(() -> collective_options(nothing, timeout_s), comm, "barrier", timeout_s)
    check(LibDDP.ddp_barrier(comm.handle, opts))
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
    with_tensors(leaves.arrays, comm, "check_replicas", C_NULL) do tensors
        check(LibDDP.ddp_check_replicas(comm.handle, tensors, length(tensors), C_NULL, identical))
    end
    identical[] == 1 && return true
    @warn without_finalizers(() -> unsafe_string(LibDDP.ddp_last_error_message()))
    return false
end
