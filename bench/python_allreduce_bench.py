"""ddp.allreduce of a model's gradient list from Python against what a Python
user would write with mpi4py: one Allreduce per tensor, and one Allreduce over
a flat buffer that already holds every gradient (no packing cost).

    mpirun -np 2 .venv/bin/python bench/python_allreduce_bench.py MODEL.tsv [RUNS]

Strategies are interleaved round by round (bench/interleaved.py); the
median (min, max) of RUNS rounds; rank 0 prints.
"""
import sys

import numpy as np
from mpi4py import MPI

import ddp
from interleaved import read_shapes, time_interleaved




def main():
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10
    shapes = read_shapes(path)
    world = MPI.COMM_WORLD
    sizes = [int(np.prod(shape)) for shape in shapes]
    flat = np.ones(sum(sizes), np.float32)
    separate = [np.ones(shape, np.float32) for shape in shapes]
    with ddp.init() as comm:
        strategies = {
            "ddp.allreduce (list)": lambda: comm.allreduce(separate, op="sum"),
            "mpi4py per tensor": lambda: [world.Allreduce(MPI.IN_PLACE, t) for t in separate],
            "mpi4py flat buffer": lambda: world.Allreduce(MPI.IN_PLACE, flat),
        }
        times = time_interleaved(strategies, runs)
    if world.rank == 0:
        reference = np.median(times["ddp.allreduce (list)"])
        print(f"{path.rsplit('/', 1)[-1]}: {len(shapes)} tensors, {flat.nbytes / 1e6:.1f} MB, "
              f"{world.size} ranks, median of {runs}")
        print(f"{'strategy':24s} {'median ms':>10s} {'min':>8s} {'max':>8s} {'ratio to ddp':>13s}")
        for name, samples in times.items():
            median = np.median(samples)
            print(f"{name:24s} {median * 1e3:10.2f} {min(samples) * 1e3:8.2f} "
                  f"{max(samples) * 1e3:8.2f} {median / reference:13.2f}")


if __name__ == "__main__":
    main()
