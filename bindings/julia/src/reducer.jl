# Persistent gradient buckets (libddp's ddp_reducer_*), as PyTorch DDP's reducer: the
# gradients are registered once, libddp owns the buckets, and each gradient is an array
# inside its bucket, so a backward pass writes there and nothing is packed or copied.

"""
    Buckets

One `ddp_reducer` and its buckets. Every `Gradient` array refers to it, so the bucket
memory lives as long as the reducer or any of its arrays; the finalizer frees it then.
A finalizer must not wait for peers: one dropped with a step still open keeps its
buckets (libddp cannot finish the step without the peers).
"""
mutable struct Buckets
    handle::Ptr{LibDDP.ddp_reducer}
    step_open::Bool  # a gradient was marked since the last wait
    function Buckets(handle::Ptr{LibDDP.ddp_reducer})
        return finalizer(free_unless_open, new(handle, false))
    end
end

"""`Buckets`' finalizer: `ddp_reducer_free` with no step open is local and waits for no one."""
function free_unless_open(buckets::Buckets)
    buckets.step_open || LibDDP.ddp_reducer_free(buckets.handle)
    return nothing
end

"""
    DDP.Gradient{T,N}

One registered gradient's storage inside its reducer's bucket: a dense `N`-dimensional
array of `T` (indexing, broadcasting, `pointer`, BLAS's `mul!` into it) that keeps its
bucket alive, so it stays readable after `close(reducer)`.
"""
struct Gradient{T, N} <: DenseArray{T, N}
    data::Array{T, N}  # unsafe_wrap of the bucket memory, kept alive by `buckets`
    buckets::Buckets
end

Base.size(g::Gradient) = size(g.data)
Base.IndexStyle(::Type{<:Gradient}) = IndexLinear()
Base.@propagate_inbounds Base.getindex(g::Gradient, i::Int) = g.data[i]
Base.@propagate_inbounds Base.setindex!(g::Gradient, v, i::Int) = (g.data[i] = v; g)
Base.pointer(g::Gradient) = pointer(g.data)
Base.unsafe_convert(::Type{Ptr{T}}, g::Gradient{T}) where {T} = pointer(g.data)
Base.strides(g::Gradient) = strides(g.data)
Base.elsize(::Type{<:Gradient{T}}) where {T} = sizeof(T)
Base.similar(g::Gradient, ::Type{S}, dims::Dims) where {S} = similar(g.data, S, dims)

"""
    DDP.Reducer(like; op = :avg, comm = DDP.world(), fusion_bytes = nothing, timeout_s = nothing)

Persistent gradient buckets, PyTorch DDP's way of reducing gradients every step
(libddp's `ddp_reducer_*`). Registers the shapes and element types of `like` (an array,
or a `Tuple`/`NamedTuple`/`Vector` of arrays, as `allreduce!` takes) once; collective.
`gradients(reducer)` has `like`'s structure, its arrays inside libddp's buckets: write
each gradient there during the backward pass and `mark_ready!` it; a bucket's reduction
starts as soon as all of its gradients are marked, while Julia goes on computing.
`wait(reducer)` finishes the step: every gradient is then reduced with `op` (`:avg` by
default, or as `allreduce!`'s ops).

```julia
reducer = DDP.Reducer((w = weights, b = bias))      # once
gs = gradients(reducer)
for step in 1:steps
    gs.b .= ...; mark_ready!(reducer, gs.b)         # last layer first, as backward runs
    mul!(gs.w, δ, x'); mark_ready!(reducer, gs.w)
    wait(reducer)                                   # gs now holds the average over ranks
end
close(reducer)
```

A rank that marks a different set of gradients, or passes a bad argument, makes every
rank's `wait` throw a `DDPError` (`DDP_ERR_MISMATCH` naming it), never a hang.
`close(reducer)` finishes a step left open (collective, as `wait`) and ends the reducer;
its arrays stay readable, and the buckets are freed when the last of them is garbage
(the garbage collector does not see their size: `GC.gc()` frees them sooner). Between a
`mark_ready!` and its `wait` the communicator runs no other collective, so a reducer
dropped mid-step (an exception between them) leaves the communicator refusing every
collective until `DDP.Finalize()`: use the `do` form, `DDP.Reducer(like) do reducer
... end`, which ends such a step as failed.
"""
mutable struct Reducer
    buckets::Buckets
    comm::Communicator
    arrays::Vector{Gradient}     # flat, in registration order (1-based)
    gradients::Any               # `like`'s structure over `arrays`
    marked::BitVector            # in this step, by index (libddp's messages count from 0)
    closed::Bool
end

function Reducer(like; op = :avg, comm::Communicator = world(), fusion_bytes = nothing,
                 timeout_s = nothing)
    arrays = applicable(array_list, like) ? collect(Any, array_list(like)) : nothing
    problem = arrays === nothing ?
        "like: a $(typeof(like)), not an array or a Tuple, NamedTuple or Vector of arrays" :
        reducer_argument_error(arrays, op)
    problem === nothing || refuse(comm, "reducer_create", problem)
    layout = LibDDP.ddp_tensor[LibDDP.ddp_tensor(C_NULL, length(x), Int32(dtype_of(eltype(x))),
                                                 Int32(LibDDP.DDP_DEVICE_CPU), Int32(0), UInt32(0))
                               for x in arrays]
    names = list_names(like, arrays)
    opts = refusing(() -> collective_options(fusion_bytes, timeout_s, names), comm,
                    "reducer_create", timeout_s)
    handle = Ref{Ptr{LibDDP.ddp_reducer}}(C_NULL)
    GC.@preserve names check(LibDDP.ddp_reducer_create(comm.handle, layout, length(layout),
                                                       op_code(op), opts, handle))
    buckets = Buckets(handle[])
    views = Gradient[bucket_array(buckets, index, size(x), eltype(x)) for (index, x) in enumerate(arrays)]
    return Reducer(buckets, comm, views, same_structure(like, views), falses(length(views)), false)
end

"""What is wrong with a reducer's gradient list or op, or `nothing`."""
function reducer_argument_error(arrays, op)
    isempty(arrays) && return "like: no arrays to register"
    for (index, x) in enumerate(arrays)
        x isa AbstractArray || return "like[$index]: a $(typeof(x)), not an array"
        haskey(DTYPES, eltype(x)) || return "like[$index]: element type $(eltype(x)) has no libddp dtype"
        pointer_or_nothing(x) isa Ptr || return "like[$index]: a $(typeof(x)) is not host memory; " *
                                                "the reducer's buckets are host memory"
    end
    try
        op_code(op)
    catch error
        error isa ArgumentError || rethrow()
        return error.msg
    end
    return nothing
end

pointer_or_nothing(x) = applicable(pointer, x) ? pointer(x) : nothing

"""Gradient `index`'s storage in its bucket, as a `Gradient` of `dims` and element type `T`."""
function bucket_array(buckets::Buckets, index::Integer, dims::Dims, ::Type{T}) where {T}
    gradient = Ref{LibDDP.ddp_tensor}()
    check(LibDDP.ddp_reducer_gradient(buckets.handle, index - 1, gradient))
    data = unsafe_wrap(Array, Ptr{T}(gradient[].data), dims; own = false)
    return Gradient{T, length(dims)}(data, buckets)
end

same_structure(::AbstractArray{<:Number}, views) = views[1]
same_structure(like::Tuple, views) = Tuple(views)
same_structure(like::NamedTuple, views) = NamedTuple{keys(like)}(Tuple(views))
same_structure(like::AbstractVector{<:AbstractArray}, views) = views

"""
    gradients(reducer)

The reducer's gradients, in the structure it was registered with (an array, or a
`Tuple`/`NamedTuple`/`Vector` of arrays): `DDP.Gradient` arrays inside libddp's
buckets. Write each gradient there, `mark_ready!` it, and after `wait(reducer)` read
the reduced values there.
"""
gradients(reducer::Reducer) = reducer.gradients

"""
    mark_ready!(reducer, gradient)

Marks `gradient` (one of `gradients(reducer)`'s arrays itself, or its 1-based index in
registration order) as computed for this step, in any order; its bucket's reduction
starts when the bucket is complete. A bad argument, or a gradient marked twice, ends
the step on every rank: this rank takes part as failed (returning once its peers reach
their `wait`) and throws a `DDPError` with `DDP_ERR_INVALID_ARGUMENT`; each peer's
`wait` throws one with `DDP_ERR_MISMATCH` naming this rank. Returns `reducer`.
"""
function mark_ready!(reducer::Reducer, gradient)
    buckets = live_buckets(reducer)
    index = gradient_index(reducer, gradient)
    index isa String && fail_step(reducer, index)
    check(LibDDP.ddp_reducer_mark_ready(buckets.handle, index - 1))
    buckets.step_open = true
    reducer.marked[index] = true
    return reducer
end

"""The 1-based index of `gradient` (an index, or one of the reducer's arrays itself) that
may be marked now, or a sentence saying why there is none."""
function gradient_index(reducer::Reducer, gradient)
    count = length(reducer.arrays)
    index = if gradient isa Integer && !(gradient isa Bool)
        1 <= gradient <= count || return "gradient index $gradient is out of range: " *
                                         "the reducer has $count gradients (1 to $count)"
        Int(gradient)
    else
        findfirst(x -> x === gradient, reducer.arrays)
    end
    index === nothing && return "mark_ready! takes one of gradients(reducer)'s arrays itself " *
                                "or its index, not a $(typeof(gradient)) of its own"
    reducer.marked[index] && return "gradient $index was already marked ready in this step"
    return index
end

"""Ends this rank's step as failed (collective, see `mark_ready!`) and throws `reason`."""
function fail_step(reducer::Reducer, reason::AbstractString)
    status = end_step_as_failed!(reducer, reason)
    status == LibDDP.DDP_OK || check(status)
    throw(DDPError(LibDDP.DDP_ERR_INVALID_ARGUMENT, "rank $(local_rank(reducer.comm)): $reason"))
end

"""Ends this rank's step as failed (`ddp_reducer_fail_step`, collective: the peers' `wait`
throws naming this rank and `reason`); returns libddp's status."""
function end_step_as_failed!(reducer::Reducer, reason::AbstractString)
    status = LibDDP.ddp_reducer_fail_step(reducer.buckets.handle, reason)
    step_ended!(reducer)
    return status
end

"""Forgets this step's marks: the next `mark_ready!` starts a new step."""
function step_ended!(reducer::Reducer)
    reducer.buckets.step_open = false
    fill!(reducer.marked, false)
    return nothing
end

function live_buckets(reducer::Reducer)
    reducer.closed && throw(ArgumentError("the reducer is closed (its gradient arrays stay readable)"))
    return reducer.buckets
end

"""
    wait(reducer::DDP.Reducer)

Finishes the step: waits for every bucket (starting those with unmarked gradients, so
that no peer waits for ever), checks that every rank marked the same gradients, and
readies the reducer for the next step. Collective. Throws a `DDPError` on a mismatch
or a timeout (the step's gradients are then undefined).
"""
function Base.wait(reducer::Reducer)
    buckets = live_buckets(reducer)
    try
        check(LibDDP.ddp_reducer_wait(buckets.handle))
    finally
        step_ended!(reducer)
    end
    return reducer
end

"""
    close(reducer::DDP.Reducer)

Ends the reducer: a step left open is finished first (collective, as `wait`). Its
gradient arrays stay readable (the buckets are freed once none is reachable). Closing
twice does nothing.
"""
function Base.close(reducer::Reducer)
    reducer.closed && return nothing
    try
        reducer.buckets.step_open && wait(reducer)
    finally
        reducer.closed = true  # also when that wait threw: closing twice does nothing
    end
    return nothing
end

"""
    DDP.Reducer(f, like; kwargs...)

Calls `f(reducer)` and closes the reducer afterwards, also when `f` throws. A step
that `f` leaves open by throwing between `mark_ready!` and `wait` is ended as failed
on this rank first (the peers' `wait` throws, naming this rank), so the communicator
stays usable: without that, an open step makes libddp refuse every other collective
on the communicator until `DDP.Finalize()`.
"""
function Reducer(f::Function, like; kwargs...)
    reducer = Reducer(like; kwargs...)
    try
        return f(reducer)
    catch
        if reducer.buckets.step_open && !reducer.closed
            end_step_as_failed!(reducer, "rank $(local_rank(reducer.comm)) threw during the step")
        end
        rethrow()
    finally
        close(reducer)
    end
end

Base.isopen(reducer::Reducer) = !reducer.closed
