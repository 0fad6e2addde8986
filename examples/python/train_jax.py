"""Data-parallel training of a small JAX model with libddp: the whole step,
gradient averaging included, inside jax.jit.

    mpirun -np 2 .venv/bin/python examples/python/train_jax.py   (as root: mpirun --allow-run-as-root)

ddp.jax.broadcast starts every rank from rank 0's parameters;
ddp.jax.average_gradients(), first in an optax chain, averages the
gradients over the ranks inside the jitted step (an XLA custom call that
makes libddp's allreduce). Each rank takes its share of a synthetic
regression set through a ShardedSampler; rank 0 prints the mean loss over
all ranks per epoch, and the run ends by checking that every rank holds
bitwise the same parameters.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ddp
import ddp.jax

N_ITEMS, N_FEATURES, HIDDEN = 4096, 8, 32
EPOCHS, BATCH, LEARNING_RATE = 10, 64, 0.01


def synthetic_data():
    """The same data set on every rank: y = a fixed random network of x, plus noise."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N_ITEMS, N_FEATURES)).astype(np.float32)
    teacher = rng.standard_normal((N_FEATURES, 1)).astype(np.float32)
    y = np.tanh(x @ teacher) + 0.05 * rng.standard_normal((N_ITEMS, 1)).astype(np.float32)
    return x, y


def initial_parameters(seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), 2)
    return {"w1": jax.random.normal(keys[0], (N_FEATURES, HIDDEN)) / np.sqrt(N_FEATURES),
            "b1": jnp.zeros(HIDDEN),
            "w2": jax.random.normal(keys[1], (HIDDEN, 1)) / np.sqrt(HIDDEN),
            "b2": jnp.zeros(1)}


def loss_fn(params, x, y):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)


optimizer = optax.chain(ddp.jax.average_gradients(), optax.adam(LEARNING_RATE))


@jax.jit
def train_step(params, state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, state = optimizer.update(grads, state, params)  # the mean over ranks first
    return optax.apply_updates(params, updates), state, loss


def main():
    x, y = synthetic_data()
    comm = ddp.init()
    # Different random starts on purpose: the broadcast makes them equal.
    params = ddp.jax.broadcast(initial_parameters(seed=comm.rank), root=0)
    state = optimizer.init(params)
    sampler = ddp.ShardedSampler(N_ITEMS, seed=1)
    if comm.rank == 0:
        print(f"{comm.size} ranks ({comm.backend}), {len(sampler)} items each", flush=True)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        order = sampler.indices()
        epoch_loss = 0.0
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            params, state, loss = train_step(params, state, x[batch], y[batch])
            epoch_loss += float(loss) * len(batch)
        mean_loss = comm.allreduce(epoch_loss / len(order), op="avg")
        if comm.rank == 0:
            print(f"epoch {epoch + 1:2d}/{EPOCHS}  loss {mean_loss:.5f}", flush=True)
    check = comm.check_replicas(params)
    if comm.rank == 0:
        print("replicas identical" if check else f"replicas differ: {check.message}", flush=True)
    return 0 if check else 1


if __name__ == "__main__":
    sys.exit(main())
