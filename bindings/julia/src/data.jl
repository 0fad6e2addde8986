# Splitting a data set across ranks: libddp's ddp_shard_indices, 1-based.

const STRATEGIES = Dict(:strided => LibDDP.DDP_SHARD_STRIDED,
                        :contiguous => LibDDP.DDP_SHARD_CONTIGUOUS)

"""
    shard_indices(n_items, rank, world; shuffle = true, seed = 0, epoch = 0,
                  drop_last = false, strategy = :strided)

The 1-based indices of the items that rank `rank` (0-based) of `world` owns, exactly as
libddp computes them in every language (the order is specified in ddp.h). Every rank
gets the same number: `ceil(n_items / world)`, wrapping around to pad, or
`floor(n_items / world)` with `drop_last`. `strategy` `:strided` is
`DistributedSampler`'s split, `:contiguous` FluxMPI's; `shuffle` permutes by
`(seed, epoch)`, so change `epoch` every epoch. Pure: needs no `DDP.Init()`.
"""
function shard_indices(n_items::Integer, rank::Integer, world::Integer; shuffle::Bool = true,
                       seed::Integer = 0, epoch::Integer = 0, drop_last::Bool = false,
                       strategy::Symbol = :strided)
    haskey(STRATEGIES, strategy) || throw(ArgumentError(
        "strategy :$strategy: use :strided or :contiguous"))
    opts = Ref{LibDDP.ddp_shard_options}()
    check(LibDDP.ddp_shard_options_init(opts, sizeof(LibDDP.ddp_shard_options)))
    opts[] = LibDDP.ddp_shard_options(opts[].struct_size, Int32(shuffle), UInt64(seed),
                                      UInt64(epoch), Int32(drop_last), STRATEGIES[strategy])
    count = Ref{Int64}(0)
    check(LibDDP.ddp_shard_count(n_items, world, opts, count))
    indices = Vector{Int64}(undef, count[])
    check(LibDDP.ddp_shard_indices(n_items, rank, world, opts, indices, length(indices), count))
    return indices .+ 1
end

"""
    default_numobs(data)

The number of observations, as MLUtils counts them: the last dimension of an array,
the common count of a `Tuple`/`NamedTuple` of containers, else `length`.
"""
default_numobs(data::AbstractArray) = size(data, ndims(data))
default_numobs(data) = length(data)

function default_numobs(data::Union{Tuple, NamedTuple})
    counts = unique(map(default_numobs, values(data)))
    length(counts) == 1 || throw(ArgumentError(
        "the containers of the data tuple hold different numbers of observations: $counts"))
    return only(counts)
end

"""
    default_getobs(data, i)

Observation(s) `i` as MLUtils takes them: the last index of an array (a copy), each
element of a `Tuple`/`NamedTuple`, else `data[i]`.
"""
default_getobs(data::AbstractArray, i) = data[ntuple(_ -> Colon(), ndims(data) - 1)..., i]
default_getobs(data::Union{Tuple, NamedTuple}, i) = map(part -> default_getobs(part, i), data)
default_getobs(data, i) = data[i]

"""How a data set is counted and indexed: MLUtils' numobs/getobs once its extension loads."""
const NUMOBS = Ref{Any}(default_numobs)
const GETOBS = Ref{Any}(default_getobs)

"""
    DistributedDataContainer(data; comm = DDP.world(), shuffle = false, seed = 0,
                             epoch = 0, drop_last = false, strategy = :contiguous)

This rank's shard of `data` (`FluxMPI.DistributedDataContainer`,
`DistributedUtils.DistributedDataContainer`), with the MLUtils interface: `numobs` is
the shard's size, the same on every rank, so no rank runs an extra batch; `getobs(c, i)`
is observation `indices[i]` of `data`. The indices come from `shard_indices`, by
default FluxMPI's contiguous, unshuffled split.
"""
struct DistributedDataContainer{D}
    data::D
    indices::Vector{Int}
end

function DistributedDataContainer(data; comm::Communicator = world(), shuffle::Bool = false,
                                  seed::Integer = 0, epoch::Integer = 0,
                                  drop_last::Bool = false, strategy::Symbol = :contiguous)
    indices = shard_indices(NUMOBS[](data), local_rank(comm), total_workers(comm);
                            shuffle, seed, epoch, drop_last, strategy)
    return DistributedDataContainer(data, indices)
end

Base.length(c::DistributedDataContainer) = length(c.indices)
Base.getindex(c::DistributedDataContainer, i) = GETOBS[](c.data, c.indices[i])
