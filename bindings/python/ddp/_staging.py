"""Leaves that libddp cannot write in place, JAX arrays (immutable) and
numbers (Python or NumPy scalars), are copied into small NumPy buffers that it
can write; after the call each comes back as a new value of its own kind.
Mutable arrays (NumPy, PyTorch, CuPy, buffers) are passed as they are and
reduced in place (a torch tensor that requires grad through its detached
alias). This is what mpi4jax and hvd.allreduce do for immutable
arrays: return the result."""
import numbers

import numpy as np

IMMUTABLE_ARRAY_MODULES = {"jax", "jaxlib"}


def is_immutable_array(value):
    return type(value).__module__.split(".")[0] in IMMUTABLE_ARRAY_MODULES and \
        hasattr(value, "__dlpack__")


def is_number(value):
    if isinstance(value, np.generic):
        return isinstance(value, (np.number, np.bool_))
    return isinstance(value, numbers.Number) and not isinstance(value, complex)


class Staging:
    """The buffers to hand libddp for a list of leaves, and the results.

    writes: the call writes into the buffers (a JAX array is then copied;
    for reads it is passed through DLPack as it is). averaging: a Python int
    is averaged as a float64, since a mean of integers is not an integer."""

    def __init__(self, leaves, writes, averaging=False):
        self.leaves = leaves
        self.buffers = []
        self._finishers = []  # per leaf: buffer -> result, or None when in place
        for leaf in leaves:
            buffer, finish = _stage(leaf, writes, averaging)
            self.buffers.append(buffer)
            self._finishers.append(finish)

    def results(self):
        """The leaves after the call: the same objects where reduced in place."""
        return [leaf if finish is None else finish(buffer)
                for leaf, buffer, finish in zip(self.leaves, self.buffers, self._finishers)]

    def rebuilt(self, tree, rebuild):
        """tree itself when every leaf was changed in place, else a new tree."""
        results = self.results()
        if all(result is leaf for result, leaf in zip(results, self.leaves)):
            return tree
        return rebuild(results)


def _stage(leaf, writes, averaging):
    if type(leaf) is np.ndarray:  # the common case first: in place
        return leaf, None
    if getattr(leaf, "requires_grad", False) is True and hasattr(leaf, "detach"):
        # A torch tensor that requires grad (a parameter, a loss) refuses
        # DLPack; its detached alias shares the storage, so the call writes
        # the tensor itself, outside autograd. Its version counter is bumped
        # then, as by torch's in-place ops: a backward pass that needs the old
        # values raises instead of using the new ones.
        return leaf.detach(), (lambda buffer: _written(leaf)) if writes else None
    if is_immutable_array(leaf):
        if not writes:
            return leaf, None
        import jax  # loaded: leaf is a JAX array
        return np.array(leaf), lambda buffer: jax.device_put(buffer, leaf.sharding)
    if is_number(leaf):
        if isinstance(leaf, np.generic):
            return np.array([leaf]), lambda buffer: buffer[0]
        if isinstance(leaf, bool):
            return np.array([leaf]), None  # refused by dtype (bool) with a clear message
        as_float = isinstance(leaf, float) or (averaging and isinstance(leaf, numbers.Integral))
        kind = float if as_float else type(leaf)
        buffer = np.array([leaf], dtype=np.float64 if as_float else np.int64)
        return buffer, lambda buffer: kind(buffer[0])
    return leaf, None


def _written(tensor):
    """A torch tensor after libddp wrote its storage: autograd told, as by an
    in-place op (torch is loaded: tensor is one of its)."""
    import torch
    torch.autograd.graph.increment_version(tensor)
    return tensor
