"""Python-side cost of one collective call, without communication: how long
the ddp package takes to turn a gradient list into libddp's tensor array.

    .venv/bin/python bench/python_call_overhead_bench.py MODEL.tsv [RUNS]

It times, on the model's list of float32 arrays (one process, no MPI):
  - TensorList alone (what the package did before it took trees),
  - tree flattening (optree) + staging + TensorList (what allreduce does now),
  - tensors given through __dlpack__ only (as a PyTorch CPU tensor is):
    TensorList (np.from_dlpack for CPU tensors), and the package's own reading
    of the DLPack capsule, kept for device memory and bfloat16.
Interleaved round by round in a new order each round; the median (min, max)
per call in microseconds, and each as a ratio to TensorList alone.
"""
import random
import sys
import time

import numpy as np

from ddp import _trees
from ddp._staging import Staging
from ddp._tensors import TensorList

from interleaved import read_shapes


class OnlyDLPack:
    """An array seen only through __dlpack__, as a framework's tensor is."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def through_the_capsule(tensors):
    reader = TensorList([], writes=True)
    return [reader._from_dlpack_capsule(tensor, True, f"tensor {index}")
            for index, tensor in enumerate(tensors)]


def main():
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    arrays = [np.ones(shape, np.float32) for shape in read_shapes(path)]
    wrapped = [OnlyDLPack(array) for array in arrays]

    def tree_path():
        leaves, _ = _trees.flatten(arrays)
        return TensorList(Staging(leaves, writes=True).buffers, writes=True)

    strategies = {
        "TensorList (NumPy list)": lambda: TensorList(arrays, writes=True),
        "flatten + staging + TensorList": tree_path,
        "__dlpack__ only: TensorList": lambda: TensorList(wrapped, writes=True),
        "__dlpack__ only: capsule read": lambda: through_the_capsule(wrapped),
    }
    times = {name: [] for name in strategies}
    for round_index in range(runs + 5):
        order = list(strategies)
        random.shuffle(order)
        for name in order:
            started = time.perf_counter()
            strategies[name]()
            if round_index >= 5:
                times[name].append((time.perf_counter() - started) * 1e6)
    base = np.median(times["TensorList (NumPy list)"])
    print(f"{len(arrays)} tensors, {runs} rounds; microseconds per call")
    for name, values in times.items():
        print(f"{name:34s} {np.median(values):9.1f} ({min(values):.1f}, {max(values):.1f})"
              f"  x{np.median(values) / base:.2f}")


if __name__ == "__main__":
    main()
