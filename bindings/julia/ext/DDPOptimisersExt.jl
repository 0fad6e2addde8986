"""
`DDP.DistributedOptimizer(rule)`: an Optimisers.jl rule that averages each gradient
over all ranks, then applies `rule` (as FluxMPI's and Lux's DistributedOptimizer).
"""
module DDPOptimisersExt

using Optimisers: Optimisers
using DDP: DDP

"""The rule `DDP.DistributedOptimizer` returns: `rule` after averaging each gradient."""
struct DistributedRule{R <: Optimisers.AbstractRule} <: Optimisers.AbstractRule
    rule::R
end

DDP.DistributedOptimizer(rule::Optimisers.AbstractRule) = DistributedRule(rule)

Optimisers.init(o::DistributedRule, x::AbstractArray) = Optimisers.init(o.rule, x)

# Every rank's Optimisers.update! visits the leaves in the same order, so the
# per-leaf allreduces pair up; a rank with a different tree gets DDP_ERR_MISMATCH.
function Optimisers.apply!(o::DistributedRule, state, x, dx)
    gradient = dx isa AbstractArray && DDP.is_contiguous(dx) ? dx : collect(dx)
    DDP.allreduce!(gradient, :avg)
    return Optimisers.apply!(o.rule, state, x, gradient)
end

end # module
