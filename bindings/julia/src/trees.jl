# Parameter and optimizer-state trees (what Lux parameters, Flux/Zygote gradients and
# Optimisers.jl states are): nested NamedTuples and Tuples of arrays and numbers,
# walked here without dependencies; other structs through Functors.jl (extension).

"""
    TreeLeaves

The leaves of a tree in walk order: arrays of numbers, which collectives change in
place, and real numbers, which come back as new values in a rebuilt tree.
"""
struct TreeLeaves
    arrays::Vector{AbstractArray}
    scalars::Vector{Float64}
end

"""
Walks structs other than NamedTuples and Tuples: `nothing` until the Functors
extension sets it to `Functors.functor` (children and a function rebuilding the
struct from them).
"""
const STRUCT_WALKER = Ref{Any}(nothing)

"""
    tree_leaves(tree)

The `TreeLeaves` of `tree`. Singletons (`nothing`, `Val(true)`, functions), symbols
and strings hold no data and are skipped.
"""
tree_leaves(tree) = collect_leaves!(TreeLeaves(AbstractArray[], Float64[]), tree)

collect_leaves!(leaves::TreeLeaves, x::AbstractArray{<:Number}) = (push!(leaves.arrays, x); leaves)
collect_leaves!(leaves::TreeLeaves, x::Real) = (push!(leaves.scalars, Float64(x)); leaves)
collect_leaves!(leaves::TreeLeaves, ::Union{Symbol, AbstractString}) = leaves

function collect_leaves!(leaves::TreeLeaves, x::Union{Tuple, NamedTuple, AbstractArray})
    foreach(child -> collect_leaves!(leaves, child), x)
    return leaves
end

function collect_leaves!(leaves::TreeLeaves, x)
    fieldcount(typeof(x)) == 0 && return leaves
    children, _ = struct_children(x)
    return collect_leaves!(leaves, children)
end

"""The children of struct `x` and the function rebuilding it, through the walker."""
function struct_children(x)
    walker = STRUCT_WALKER[]
    walker === nothing && throw(ArgumentError(
        "a $(typeof(x)) in the tree: DDP walks NamedTuples, Tuples, arrays and numbers by " *
        "itself; load Functors.jl (Lux, Flux and Optimisers.jl load it) to walk other structs"))
    return walker(x)
end

"""
    rebuild(tree, scalars)

`tree` with its numbers replaced, in walk order, by `scalars` (converted back to each
number's type); its arrays are the same objects.
"""
function rebuild(tree, scalars::Vector{Float64})
    next = Ref(0)
    rebuilt = rebuild_node(tree, scalars, next)
    next[] == length(scalars) || error("rebuild used $(next[]) of $(length(scalars)) numbers")
    return rebuilt
end

rebuild_node(x::AbstractArray{<:Number}, scalars, next) = x
rebuild_node(x::Union{Symbol, AbstractString}, scalars, next) = x
rebuild_node(x::Bool, scalars, next) = scalars[next[] += 1] != 0
rebuild_node(x::Integer, scalars, next) = round(typeof(x), scalars[next[] += 1])
rebuild_node(x::Real, scalars, next) = convert(typeof(x), scalars[next[] += 1])
rebuild_node(x::Tuple, scalars, next) = map(child -> rebuild_node(child, scalars, next), x)
rebuild_node(x::NamedTuple, scalars, next) = map(child -> rebuild_node(child, scalars, next), x)
rebuild_node(x::AbstractArray, scalars, next) = map(child -> rebuild_node(child, scalars, next), x)

function rebuild_node(x, scalars, next)
    fieldcount(typeof(x)) == 0 && return x
    children, rebuild_struct = struct_children(x)
    return rebuild_struct(rebuild_node(children, scalars, next))
end

"""
    synchronize!(ps; root_rank = 0, comm = DDP.world(), fusion_bytes = nothing, timeout_s = nothing)

Makes every rank's `ps` equal rank `root_rank`'s (`FluxMPI.synchronize!`,
`DistributedUtils.synchronize!!`): parameters or optimizer state as nested
`NamedTuple`s, `Tuple`s and arrays (other structs through Functors.jl). Arrays are
overwritten in place; numbers (step counts, learning rates) cannot be, so use the
returned tree: `ps = synchronize!(ps)`. libddp first checks that every rank holds the
same structure; otherwise every rank gets a `DDPError` (`DDP_ERR_MISMATCH`) and
nothing is overwritten.
"""
function synchronize!(ps; root_rank = 0, comm::Communicator = world(),
                      fusion_bytes = nothing, timeout_s = nothing)
    leaves = tree_leaves(ps)
    names = leaf_names(ps, leaves.arrays)
    root_code, opts = refusing(comm, "sync_optimizer_state", timeout_s) do
        rank_code("root_rank", root_rank), collective_options(fusion_bytes, timeout_s, names)
    end
    scalars = leaves.scalars
    naming_tensors(ps) do
        with_tensors(leaves.arrays, comm, "sync_optimizer_state", opts) do tensors
            GC.@preserve scalars names check(LibDDP.ddp_sync_optimizer_state(
                comm.handle, tensors, length(tensors), pointer(scalars), length(scalars),
                root_code, opts))
        end
    end
    return isempty(scalars) ? ps : rebuild(ps, scalars)
end

"""
    allreduce_gradients(gs; comm = DDP.world(), fusion_bytes = nothing, timeout_s = nothing)

Averages the gradient tree `gs` over all ranks in one libddp call (small arrays
fused) and returns it (`FluxMPI.allreduce_gradients`): arrays in place, numbers in the
returned tree. While a `timeline` records, each array is named by its path
(`layer_1.weight`). Averages, as FluxMPI does; `allreduce!` sums unless told `:avg`.
"""
function allreduce_gradients(gs; comm::Communicator = world(),
                             fusion_bytes = nothing, timeout_s = nothing)
    leaves = tree_leaves(gs)
    scalars = leaves.scalars
    names = leaf_names(gs, leaves.arrays)
    if !isempty(scalars)  # the numbers go as one more array, unnamed
        arrays, names = [leaves.arrays; [scalars]], with_unnamed(names, 1)
    else
        arrays = leaves.arrays
    end
    naming_tensors(gs) do
        allreduce_arrays!(arrays, :avg, comm, fusion_bytes, timeout_s, names)
    end
    return isempty(scalars) ? gs : rebuild(gs, scalars)
end

"""
    DistributedOptimizer(rule)

Wraps an Optimisers.jl rule so that `Optimisers.update!` averages each gradient over
all ranks before applying `rule` (`FluxMPI.DistributedOptimizer`,
`DistributedUtils.DistributedOptimizer`). Needs Optimisers.jl loaded (its extension
defines the wrapper); `allreduce_gradients` does the same for the whole tree in one call.
"""
DistributedOptimizer(rule) = throw(ArgumentError(
    "DistributedOptimizer wraps an Optimisers.jl rule: `using Optimisers` and pass a rule " *
    "such as Adam(), not a $(typeof(rule))"))
