# Names of a call's arrays for the timeline: each array leaf's path in its tree
# (`layer_1.weight`, `state.1`), passed as ddp_collective_options.names while a
# timeline records, so that the trace says which parameters a call or bucket carried.

"""
Whether a timeline records on this process: set by `timeline(f, path)` for its
duration and by `DDP.Init()` when `DDP_TIMELINE` is set. While it is false the
collectives build no names at all.
"""
const TIMELINE_RECORDING = Ref(false)

"""
    LeafNames

The names of a call's tensors as libddp reads them: the strings and, kept beside
them, one C pointer per tensor (`C_NULL` for an unnamed one). Keep it alive
(`GC.@preserve`) for the call.
"""
struct LeafNames
    strings::Vector{String}
    pointers::Vector{Ptr{Cchar}}
end

LeafNames(strings::Vector{String}) = LeafNames(strings, Ptr{Cchar}[pointer(s) for s in strings])

"""
    leaf_names(tree, arrays)

`nothing` when no timeline records (nothing is built); else the `LeafNames` of the
array leaves of `tree`: field names and 1-based indices joined with dots, in the
order `arrays` lists them (`nothing` if the tree's leaves are not those arrays).
"""
function leaf_names(tree, arrays)
    TIMELINE_RECORDING[] || return nothing
    paths = collect_paths!(String[], tree, "")
    length(paths) == length(arrays) || return nothing
    return LeafNames(paths)
end

"""
    with_unnamed(names, n)

`names` followed by `n` unnamed tensors (the numbers of a tree, reduced as one
more array), or `nothing` when `names` is.
"""
with_unnamed(::Nothing, n) = nothing
with_unnamed(names::LeafNames, n) = LeafNames(names.strings, [names.pointers; fill(Ptr{Cchar}(C_NULL), n)])

child_path(path, key) = isempty(path) ? string(key) : string(path, '.', key)

collect_paths!(paths, ::AbstractArray{<:Number}, path) = push!(paths, isempty(path) ? "<root>" : path)
collect_paths!(paths, ::Union{Real, Symbol, AbstractString}, path) = paths

function collect_paths!(paths, x::NamedTuple, path)
    foreach((key, child) -> collect_paths!(paths, child, child_path(path, key)), keys(x), values(x))
    return paths
end

function collect_paths!(paths, x::Union{Tuple, AbstractArray}, path)
    for (index, child) in enumerate(x)
        collect_paths!(paths, child, child_path(path, index))
    end
    return paths
end

function collect_paths!(paths, x, path)
    fieldcount(typeof(x)) == 0 && return paths
    children, _ = struct_children(x)
    return collect_paths!(paths, children, path)
end
