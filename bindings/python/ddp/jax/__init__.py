"""libddp for JAX programs: collectives inside jax.jit, as mpi4jax's.

    import ddp, ddp.jax
    comm = ddp.init()
    params = ddp.jax.broadcast(params, root=0)
    optimizer = optax.chain(ddp.jax.average_gradients(), optax.adam(1e-3))

    @jax.jit
    def step(params, state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, state = optimizer.update(grads, state)      # averaged over ranks here
        return optax.apply_updates(params, updates), state, ddp.jax.allreduce(loss, op="avg")

allreduce, broadcast, allgather, reduce_scatter and alltoall take a tree of JAX arrays
(or numbers) and return a new tree; inside jit each is an XLA custom call
through JAX's FFI whose handler makes libddp's call (CPU arrays). They keep
the promises of every libddp call: a rank with a different tree, dtype or
op, or a timeout, fails the call on every rank, raised by JAX (as its
runtime error, whose message is libddp's) where the result is used.
"""
from ._collectives import allgather, allreduce, alltoall, broadcast, reduce_scatter
from ._optax import average_gradients

__all__ = ["allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall",
           "average_gradients"]
