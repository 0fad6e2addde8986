"""
`DistributedDataContainer` under MLUtils' observation interface: the shard's size is
`numobs`, its items come from `getobs` of the wrapped data, and the data set is counted
with `MLUtils.numobs`, so any MLUtils data container (tuples, custom types) can be
sharded and handed to `MLUtils.DataLoader`.
"""
module DDPMLUtilsExt

using MLUtils: MLUtils
using DDP: DDP, DistributedDataContainer

function __init__()
    DDP.NUMOBS[] = MLUtils.numobs
    DDP.GETOBS[] = MLUtils.getobs
end

MLUtils.numobs(c::DistributedDataContainer) = length(c.indices)
MLUtils.getobs(c::DistributedDataContainer, i) = MLUtils.getobs(c.data, c.indices[i])

end # module
