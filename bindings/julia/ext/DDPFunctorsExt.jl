"""
Walks any struct of a parameter or optimizer-state tree (Flux layers, Optimisers.jl
`Leaf`s, ComponentArrays' wrappers) through `Functors.functor`, for `synchronize!`,
`allreduce_gradients` and `check_replicas`.
"""
module DDPFunctorsExt

using Functors: Functors
using DDP: DDP

function __init__()
    DDP.STRUCT_WALKER[] = Functors.functor
end

end # module
