"""Data-parallel training of a small NumPy MLP with libddp.

    mpirun -np 2 .venv/bin/python examples/python/train_mlp.py   (as root: mpirun --allow-run-as-root)
    .venv/bin/python examples/python/train_mlp.py --local 2       (2 ranks as threads of one process)

Each rank draws its own share of a synthetic regression data set through a
ShardedSampler, computes gradients on it, and averages them as PyTorch DDP
would: the gradients live in a reducer's buckets (persistent gradient
buckets), the backward pass writes each one straight into its place and marks
it ready, last layer first, so its bucket's reduction can start at once, and
one wait per step completes the averaging. Rank 0
prints one line per epoch (under mpirun a rank's stdout is a pseudo-terminal
even when mpirun's own output goes to a file, so a bar redrawn with \r would
end up as one long line there); the run ends by checking that every rank
holds bitwise the same parameters. The communicator is finalized when the
script exits. With --local N the ranks are N threads of this one process
(ddp.init_local, no mpirun), each training as a process would, to the same
losses.
"""
import sys
import threading

import numpy as np

import ddp

N_ITEMS, N_FEATURES, HIDDEN = 4096, 8, 32
EPOCHS, BATCH, LEARNING_RATE = 15, 64, 0.05


def synthetic_data():
    """The same data set on every rank: y = a fixed random network of x, plus noise."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N_ITEMS, N_FEATURES)).astype(np.float32)
    teacher = rng.standard_normal((N_FEATURES, 1)).astype(np.float32)
    y = np.tanh(x @ teacher) + 0.05 * rng.standard_normal((N_ITEMS, 1)).astype(np.float32)
    return x, y


def initial_parameters(seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N_FEATURES, HIDDEN)).astype(np.float32) / np.sqrt(N_FEATURES),
            np.zeros(HIDDEN, np.float32),
            rng.standard_normal((HIDDEN, 1)).astype(np.float32) / np.sqrt(HIDDEN),
            np.zeros(1, np.float32)]


def backward(params, x, y, reducer):
    """The loss; the gradients go into the reducer's views, each marked
    ready as soon as it is computed (the output layer's first)."""
    w1, b1, w2, b2 = params
    g_w1, g_b1, g_w2, g_b2 = reducer.gradients
    hidden = np.tanh(x @ w1 + b1)
    error = hidden @ w2 + b2 - y
    loss = float(np.mean(error ** 2))
    d_out = 2 * error / len(x)
    np.sum(d_out, axis=0, out=g_b2)
    reducer.mark_ready(3)
    np.matmul(hidden.T, d_out, out=g_w2)
    reducer.mark_ready(2)
    d_hidden = (d_out @ w2.T) * (1 - hidden ** 2)
    np.sum(d_hidden, axis=0, out=g_b1)
    reducer.mark_ready(1)
    np.matmul(x.T, d_hidden, out=g_w1)
    reducer.mark_ready(0)
    return loss


def train(comm):
    """Trains on comm (this process's rank, or one thread's); 0 when the
    replicas end identical."""
    x, y = synthetic_data()
    # Different random starts on purpose: the broadcast makes them equal.
    params = comm.broadcast(initial_parameters(seed=comm.rank), root=0)
    sampler = ddp.ShardedSampler(N_ITEMS, seed=1, comm=comm)
    reducer = comm.reducer(params, op="avg")  # buckets shaped like the parameters
    if comm.rank == 0:
        print(f"{comm.size} ranks ({comm.backend}), {len(sampler)} items each", flush=True)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        order = sampler.indices()
        epoch_loss = 0.0
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            loss = backward(params, x[batch], y[batch], reducer)
            reducer.wait()  # every gradient is now the mean over ranks
            for param, grad in zip(params, reducer.gradients):
                param -= LEARNING_RATE * grad
            epoch_loss += loss * len(batch) / len(order)
        epoch_loss = comm.allreduce(epoch_loss, op="avg")  # a float in, a float out
        if comm.rank == 0:
            print(f"epoch {epoch + 1:2d}/{EPOCHS} loss {epoch_loss:.4f}", flush=True)
    reducer.close()
    replicas = comm.check_replicas(params)
    if comm.rank == 0:
        print("replicas identical" if replicas else f"replicas differ: {replicas.message}")
    return 0 if replicas else 1


def train_local(n):
    """n ranks as threads of this process, each training on its own communicator."""
    comms = ddp.init_local(n)
    results = [1] * n

    def rank(i):
        try:
            results[i] = train(comms[i])
        finally:
            comms[i].finalize()  # also on an error: its peers' calls then fail naming it

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return max(results)


def main(argv):
    if argv[1:2] == ["--local"] and len(argv) == 3:
        return train_local(int(argv[2]))
    if len(argv) != 1:
        print(f"usage: {argv[0]}             (under mpirun: one rank per process)\n"
              f"       {argv[0]} --local N   (N ranks as threads of this process)", file=sys.stderr)
        return 2
    return train(ddp.init())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
