"""ddp.jax.allreduce inside jax.jit against the same call outside it, and
against the Communicator's own allreduce of NumPy arrays, on a model's
gradient list of float32 JAX arrays (CPU).

    mpirun -np 2 .venv/bin/python bench/python_jax_bench.py MODEL.tsv [RUNS]

- in jit: jax.jit(lambda grads: ddp.jax.allreduce(grads, op="avg")), the
  averaging a jitted training step does (one XLA custom call for the list);
  XLA first copies the inputs, which the caller still holds
- in jit, donated: the same with donate_argnums=0, as gradients made inside
  a jitted step are: reduced where they are (fresh inputs made untimed)
- outside jit: ddp.jax.allreduce(grads, op="avg") called eagerly
- comm.allreduce (NumPy): the same list as NumPy arrays, reduced in place,
  the floor the JAX calls add to (JAX arrays are immutable, so the calls
  above write new arrays)

Each timing ends when the results are ready (block_until_ready).
Strategies are interleaved round by round (bench/interleaved.py); the
median (min, max) of RUNS rounds; rank 0 prints.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from mpi4py import MPI

import ddp
import ddp.jax
from interleaved import read_shapes, time_interleaved




def main():
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10
    shapes = read_shapes(path)
    world = MPI.COMM_WORLD
    grads = [jnp.ones(shape, jnp.float32) for shape in shapes]
    arrays = [np.ones(shape, np.float32) for shape in shapes]
    with ddp.init() as comm:
        in_jit = jax.jit(lambda tree: ddp.jax.allreduce(tree, op="avg"))
        donated = jax.jit(lambda tree: ddp.jax.allreduce(tree, op="avg"), donate_argnums=0)
        fresh = []

        def make_fresh():  # untimed: the donated call consumes its inputs
            fresh[:] = [jax.block_until_ready([g + 0 for g in grads])]
        strategies = {
            "ddp.jax.allreduce in jit": lambda: jax.block_until_ready(in_jit(grads)),
            "ddp.jax.allreduce in jit, donated": lambda: jax.block_until_ready(
                donated(fresh.pop())),
            "ddp.jax.allreduce outside jit": lambda: jax.block_until_ready(
                ddp.jax.allreduce(grads, op="avg")),
            "comm.allreduce (NumPy)": lambda: comm.allreduce(arrays, op="avg"),
        }
        times = time_interleaved(strategies, runs,
                                 setups={"ddp.jax.allreduce in jit, donated": make_fresh})
        assert all(bool(jnp.all(g == 1.0)) for g in in_jit(grads)), "not averaged"
    if world.rank == 0:
        megabytes = sum(int(np.prod(shape)) for shape in shapes) * 4 / 1e6
        reference = np.median(times["ddp.jax.allreduce outside jit"])
        print(f"{path.rsplit('/', 1)[-1]}: {len(shapes)} tensors, {megabytes:.1f} MB, "
              f"{world.size} ranks, median of {runs}")
        print(f"{'strategy':34s} {'median ms':>10s} {'min':>8s} {'max':>8s} "
              f"{'ratio to outside jit':>21s}")
        for name, samples in times.items():
            median = np.median(samples)
            print(f"{name:34s} {median * 1e3:10.2f} {min(samples) * 1e3:8.2f} "
                  f"{max(samples) * 1e3:8.2f} {median / reference:21.2f}")


if __name__ == "__main__":
    main()
