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

"""
    naming_tensors(f, tree)

Runs `f()`; a `DDP_ERR_MISMATCH` it throws names each tensor it mentions by its leaf's
path in `tree`, as the program reaches it: libddp's "tensor 1 is f64[2] on rank 0 but
f64[3] on rank 1" becomes "tensor 1 (b) is ...". The paths are built only on that
error, so a call costs nothing more; a lone array has no path to add.
"""
function naming_tensors(f, tree)
    try
        return f()
    catch error
        (error isa DDPError && error.status == LibDDP.DDP_ERR_MISMATCH) || rethrow()
        tree isa AbstractArray{<:Number} && rethrow()
        paths = collect_paths!(String[], tree, "")
        named(text) = begin
            index = parse(Int, match(r"\d+", text).match) + 1  # libddp counts from 0
            index <= length(paths) ? string(text, " (", paths[index], ")") : text
        end
        # Names libddp already gave (while a timeline records) are left as they are.
        message = replace(error.message, r"\b(tensor|leaf) \d+\b(?! \()" => named)
        throw(DDPError(error.status, error.name, message))
    end
end
