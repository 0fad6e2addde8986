"""An optax transformation that averages gradients across ranks, as
Horovod's DistributedOptimizer does for torch: chain it first."""
from ._collectives import allreduce


def average_gradients(comm=None, timeout=None):
    """An optax.GradientTransformation whose update is the mean of the
    updates (gradients) over every rank, through ddp.jax.allreduce, so it
    runs inside a jitted training step:

        optimizer = optax.chain(ddp.jax.average_gradients(), optax.adam(1e-3))
    """
    import optax  # loaded here: optax is needed only by those who use it

    def init(params):
        del params
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params
        return allreduce(updates, op="avg", comm=comm, timeout=timeout), state

    return optax.GradientTransformation(init, update)
