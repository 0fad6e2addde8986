"""
    DDP

Data-parallel training for Julia on libddp: the calls of FluxMPI.jl and
Lux.DistributedUtils under the same names (`DDP.Init()`, `local_rank()`,
`allreduce!`, `synchronize!`, `allreduce_gradients`, `DistributedOptimizer`,
`DistributedDataContainer`, ...), sub-communicators (`DDP.split`, `close`) and
persistent gradient buckets (`DDP.Reducer`, PyTorch DDP's reducer), carried
out by libddp's C ABI through the generated `DDP.LibDDP` layer. Failures are
`DDPError`s carrying libddp's status and message. Needs Base and the standard library
alone; the packages it works with (CUDA, Functors, MLUtils, MPI, Optimisers,
Preferences) are extensions, loaded when the program loads them.
"""
module DDP

include("LibDDP.jl")
include("errors.jl")
include("bfloat16.jl")
include("leaf_names.jl")
include("tensors.jl")
include("world.jl")
include("split.jl")
include("collectives.jl")
include("reducer.jl")
include("trees.jl")
include("data.jl")
include("printing.jl")
include("timeline.jl")
include("replicas.jl")

export DDPError
export local_rank, total_workers
export allreduce!, Iallreduce!, bcast!, reduce!, barrier, check_replicas
export allgather!, reduce_scatter!, allgather, reduce_scatter, alltoall!, alltoall
export synchronize!, allreduce_gradients, DistributedOptimizer
export shard_indices, DistributedDataContainer
export ddp_println, ddp_print
export timeline, dump_flight_recorder

end # module
