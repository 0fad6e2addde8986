"""What the Python benchmarks share: a model's parameter list from its
.tsv, and timing strategies interleaved round by round, in a new order each
round (the same on every rank), so that machine drift and cache state touch
all alike; warm-up rounds, then RUNS timed ones, each the slowest rank's.
"""
import random
import time

from mpi4py import MPI

# Enough for libddp to decide a list's bucket size (at most 5 candidates, each
# in 4 calls in a row, docs/buckets.md) before the timed rounds start.
WARM_UP_ROUNDS = 22


def read_shapes(path):
    """The parameter shapes of a bench/models/*.tsv file, in its order."""
    shapes = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        _, shape = line.split("\t")
        shapes.append(tuple(int(d) for d in shape.strip().split("x")))
    return shapes


def time_interleaved(strategies, runs, setups=None):
    """{name: [seconds of each timed round]} for strategies {name: call};
    setups: {name: call} run untimed before that strategy's call."""
    world = MPI.COMM_WORLD
    setups = setups or {}
    times = {name: [] for name in strategies}
    shuffler = random.Random(12345)
    order = list(strategies)
    for round_index in range(WARM_UP_ROUNDS + runs):
        shuffler.shuffle(order)  # no strategy always follows the same one
        for name in order:
            setups.get(name, lambda: None)()
            world.Barrier()
            start = time.perf_counter()
            strategies[name]()
            elapsed = time.perf_counter() - start
            if round_index >= WARM_UP_ROUNDS:
                times[name].append(world.allreduce(elapsed, op=MPI.MAX))
    return times
