"""train_mlp.py's MLP trained with ZeRO-1: the optimizer state sharded across ranks.

    mpirun -np 2 .venv/bin/python examples/python/train_mlp_zero.py
    (as root: mpirun --allow-run-as-root)

The model, data, sampler and schedule are train_mlp.py's, and so are the
losses it prints. What differs is where the optimizer runs: the parameters
and the gradients live in one flat buffer each (the parameters are views
into it), padded to a multiple of the ranks so that every rank owns an equal
shard. Every step reduce_scatter(op="avg") leaves each rank the mean of its
shard of the gradient only, the optimizer updates that shard of the
parameters, keeping state (a momentum buffer) for that shard only, and
allgather, in place from the rank's own block, gives every rank the whole
updated parameters. The optimizer state per rank is the unsharded run's
divided by the number of ranks, for one reduce_scatter and one allgather per
step where train_mlp.py makes one allreduce (the same bytes on the wire).

--momentum M uses SGD with momentum; the default, 0, is train_mlp.py's plain
SGD, which makes the losses equal to its own.
"""
import argparse
import sys
import types

import numpy as np

import ddp
from train_mlp import BATCH, EPOCHS, LEARNING_RATE, backward, initial_parameters, synthetic_data


class ShardedSGD:
    """SGD with momentum (torch.optim.SGD's rule) over one shard of the flat
    parameters: its momentum buffer is as long as the shard, not the model."""

    def __init__(self, shard, learning_rate, momentum):
        self.learning_rate, self.momentum = learning_rate, momentum
        self.velocity = np.zeros_like(shard)

    def step(self, shard, gradient):
        self.velocity *= self.momentum
        self.velocity += gradient
        shard -= self.learning_rate * self.velocity


def flat_views(flat, like):
    """Arrays shaped as `like`'s, back to back in `flat`, which they share."""
    views, offset = [], 0
    for array in like:
        views.append(flat[offset:offset + array.size].reshape(array.shape))
        offset += array.size
    return views


def main():
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--momentum", type=float, default=0.0)
    momentum = arguments.parse_args().momentum
    x, y = synthetic_data()
    comm = ddp.init()
    initial = initial_parameters(seed=comm.rank)
    n_parameters = sum(array.size for array in initial)
    shard_size = -(-n_parameters // comm.size)  # the padded buffer splits evenly
    flat_params = np.zeros(shard_size * comm.size, np.float32)
    flat_grads = np.zeros_like(flat_params)  # the padding stays 0, in both
    params = flat_views(flat_params, initial)
    for param, value in zip(params, initial):
        param[...] = value
    comm.broadcast(flat_params, root=0)  # different random starts on purpose, as train_mlp.py
    # train_mlp.backward writes each gradient into reducer.gradients and marks
    # it ready; here they are views into the flat gradient, reduced at once.
    gradients = types.SimpleNamespace(gradients=flat_views(flat_grads, initial),
                                      mark_ready=lambda index: None)
    my_params = flat_params[comm.rank * shard_size:(comm.rank + 1) * shard_size]
    my_grads = np.zeros(shard_size, np.float32)
    optimizer = ShardedSGD(my_params, LEARNING_RATE, momentum)
    sampler = ddp.ShardedSampler(len(x), seed=1)
    if comm.rank == 0:
        print(f"{comm.size} ranks ({comm.backend}), {len(sampler)} items each, ZeRO-1 "
              f"(momentum {momentum:g})", flush=True)
        print(f"optimizer state per rank: {optimizer.velocity.nbytes} bytes (a shard of "
              f"{shard_size} of the {n_parameters} parameters), unsharded: "
              f"{n_parameters * flat_params.itemsize} bytes", flush=True)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        order = sampler.indices()
        epoch_loss = 0.0
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            loss = backward(params, x[batch], y[batch], gradients)
            comm.reduce_scatter(flat_grads, op="avg", out=my_grads)  # my shard of the mean
            optimizer.step(my_params, my_grads)
            comm.allgather(my_params, out=flat_params)  # in place: every rank's shard
            epoch_loss += loss * len(batch) / len(order)
        epoch_loss = comm.allreduce(epoch_loss, op="avg")
        if comm.rank == 0:
            print(f"epoch {epoch + 1:2d}/{EPOCHS} loss {epoch_loss:.4f}", flush=True)
    replicas = comm.check_replicas(params)
    if comm.rank == 0:
        print("replicas identical" if replicas else f"replicas differ: {replicas.message}")
    return 0 if replicas else 1


if __name__ == "__main__":
    sys.exit(main())
