"""What keeps the ranks of a collective together when this binding finds a
problem that libddp cannot see, and names leaves by their tree paths.

A rank whose own arguments fail the checks made here (a non-contiguous or
read-only array, a dtype libddp lacks, a bad op, a timeout that is not a
number, a bad tree) still takes part in the collective as libddp's C
functions do when they refuse their arguments (ddp_report_invalid_call): its
peers fail at once with MismatchError naming this rank and the reason, and
this rank raises the Python exception itself. Every check therefore runs
inside `CheckedCall`'s `with` block, and the libddp call after it. Values
libddp checks itself (a timeout's: see timeout_seconds) are left to it.

libddp agrees on each tensor's dtype and element count, by list index. When
it reports a mismatch in the list, every rank (all of them got the same
MismatchError) exchanges its leaves' paths, shapes and dtypes once more, so
that the message names `grads['layer2']['bias']` rather than "tensor 41".
"""
import ctypes
import hashlib
import json
import math
import numbers
import re

import numpy as np

from . import _ffi, _group, _trees
from ._jit_order import wait_for_jitted_collectives
from ._tensors import TensorList

# libddp's own words for a difference in the tensor list: only then may the
# ranks exchange their trees (every rank got this same message).
LIST_MISMATCH = re.compile(r"mismatch: (.* passed \d+ (tensors|leaves|gradients) but|"
                           r"(tensor|leaf) \d+ is )")

# How libddp names the lists of allgather, reduce_scatter and alltoall in its messages.
INPUT_OR_OUTPUT = re.compile(r"\b(inputs|outputs)\[(\d+)\]")


def seconds(value, name, meanings):
    """`value`, argument `name`, as the C double of seconds libddp takes:
    None is 0, libddp's default. Only the type is checked here (TypeError
    naming `name` and its `meanings`, such as "None or 0: the default"); the
    value is libddp's to check, as for a C caller, with libddp's message."""
    if value is None:
        return 0.0
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} {value!r}: expected a number of seconds ({meanings})")
    try:
        return float(value)
    except OverflowError:  # an int beyond a double: infinite, as libddp will say
        return math.inf if value > 0 else -math.inf


def timeout_seconds(timeout, default):
    """A timeout as libddp takes it (a C double of seconds): None is 0, which
    libddp reads as `default`. Only the type is checked here (TypeError);
    the value is libddp's to check, as for a C caller: a finite number >= 0,
    0 meaning the default; a negative, NaN or infinite one is refused by the
    call itself (InvalidArgumentError with libddp's message), which tells
    the peers of a collective first, so that they fail at once."""
    return seconds(timeout, "timeout", f"None or 0: {default}")


def collective_options(fusion_bytes=None, stream=0, timeout=None, names=None, for_binding=False):
    """A ddp_collective_options; timeout: seconds for this call (None or 0: the
    communicator's; see timeout_seconds); names: the timeline's leaf names (a
    C array that must live as long as the options, which hold it);
    for_binding: a call this binding makes for its own purposes, numbered
    apart from the user's in libddp's messages and flight recorder."""
    options = _ffi.ddp_collective_options()
    _ffi.ddp_collective_options_init(options, ctypes.sizeof(options))
    if fusion_bytes is not None:
        options.fusion_bytes = fusion_bytes
    if timeout is not None:
        options.timeout_s = timeout_seconds(timeout, "the communicator's")
    options.cuda_stream = stream or None
    options.names = names
    options.for_binding = int(for_binding)
    return options


class CheckedCall:
    """One collective on this rank: `with call:` around the checks of its
    arguments, then `call.run(ddp_function, ...)`.

    tree and name: the argument whose leaves the call takes and its name in
    messages ("tensors", "state"); None for calls that take none."""

    def __init__(self, comm, collective, tree=None, name=None, timeout=None):
        wait_for_jitted_collectives()  # ddp/_jit_order.py: in the order they were called
        _group.touch(comm)
        self.comm = comm
        self.collective = collective
        self._tree = tree
        self._tree_read = False
        self.name = name
        self.timeout = timeout
        self._paths = None
        self._out = None  # (tree, paths) of the out= of calls that write results apart

    @property
    def tree(self):
        """The call's tree, with a one-shot iterable of leaves (a generator
        such as model.parameters()) read into a list: read inside the `with`
        block, so that a generator that raises fails the call on every rank."""
        if not self._tree_read:
            self._tree = _trees.materialized(self._tree)
            self._tree_read = True
        return self._tree

    def leaf_name(self, index):
        """Leaf `index` of the tree as code reaches it: tensors['layer2']['bias']."""
        if self._paths is None:
            self._paths = _trees.leaf_paths(self.tree)
        return self.name + self._paths[index] if index < len(self._paths) else \
            f"{self.name} leaf {index}"

    def tensor_list(self, buffers, writes, stream, leaf_indices=None):
        """The ddp_tensor list of buffers, named by path in messages;
        leaf_indices: each buffer's index among the tree's leaves, where not
        every leaf is a buffer (sync_optimizer_state's numbers)."""
        names = self.leaf_name if leaf_indices is None else \
            (lambda index: self.leaf_name(leaf_indices[index]))
        return TensorList(buffers, writes=writes, stream=stream, device=self.comm.device,
                          names=names)

    def output_list(self, buffers, stream, out=None):
        """The ddp_tensor list a call writes its results into (allgather, alltoall,
        reduce_scatter): out's leaves, named out['layer2']['bias'] in messages,
        or arrays made here for the tree's leaves (out=None)."""
        if out is not None:
            self._out = (out, None)
        return TensorList(buffers, writes=True, stream=stream, device=self.comm.device,
                          names=self.output_name)

    def output_name(self, index):
        """Output `index` as code reaches it: out['layer2']['bias'], or the
        result of tensors['layer2']['bias'] where the call made it."""
        if self._out is None:
            return f"the result of {self.leaf_name(index)}"
        tree, paths = self._out
        if paths is None:
            paths = _trees.leaf_paths(tree)
            self._out = (tree, paths)
        return "out" + paths[index] if index < len(paths) else f"out leaf {index}"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, error, traceback):
        if isinstance(error, Exception):
            self._take_part_as_invalid(f"{type(error).__name__}: {error}")
        return False  # the error goes on to the caller

    def _take_part_as_invalid(self, reason):
        try:
            options = collective_options(timeout=self.timeout)
        except (TypeError, ValueError):
            options = None  # the timeout itself was the bad argument
        try:
            _ffi.ddp_report_invalid_call(self.comm._handle, self.collective.encode(),
                                         reason.encode("utf-8", "replace"), options)
        except _ffi.DDPError:
            pass  # a finalized or broken communicator: the argument error is what to report

    def run(self, function, *arguments):
        """Calls libddp; a mismatch in the list, and libddp's refusal of an
        input or output, are raised naming tree paths."""
        try:
            return function(*arguments)
        except _ffi.MismatchError as error:
            if self.tree is None or not LIST_MISMATCH.search(error.message):
                raise
            explained = self._explained(error.message)
        except (_ffi.InvalidArgumentError, _ffi.UnsupportedError) as error:
            if not INPUT_OR_OUTPUT.search(error.message):
                raise
            explained = type(error)(error.status, INPUT_OR_OUTPUT.sub(self._named, error.message))
        raise explained

    def _named(self, found):
        """libddp's inputs[3] / outputs[3] as the tree paths they came from."""
        index = int(found.group(2))
        return self.leaf_name(index) if found.group(1) == "inputs" else self.output_name(index)

    def check_structure(self):
        """For calls made once (reducer creation, optimizer state): libddp
        compares dtypes and counts only, so the paths and shapes of every
        leaf are compared here too, at the cost of one 16-byte allreduce.
        Raises MismatchError on every rank when they differ."""
        description = self._description()
        digest = int.from_bytes(hashlib.blake2b(description, digest_size=8).digest(), "little",
                                signed=True)
        extremes = np.array([digest, ~digest], dtype=np.int64)  # max(h) and ~min(h)
        self._allreduce(extremes, _ffi.DDP_OP_MAX)
        if extremes[0] != ~extremes[1]:
            raise self._explained(f"{self.collective} mismatch: the ranks' {self.name} differ")

    def _description(self):
        leaves, _ = _trees.flatten(self.tree)
        return json.dumps([[self.leaf_name(index), _shape(leaf), _dtype(leaf)]
                           for index, leaf in enumerate(leaves)]).encode()

    def _explained(self, libddp_message):
        """The MismatchError naming the first leaf whose path, shape or dtype
        differs between rank 0 and the first rank unlike it (collective)."""
        try:
            descriptions = [json.loads(text) for text in self._gather(self._description())]
        except _ffi.DDPError:
            return _ffi.MismatchError(_ffi.DDP_ERR_MISMATCH, libddp_message)
        for rank, description in enumerate(descriptions[1:], start=1):
            if description != descriptions[0]:
                return _ffi.MismatchError(_ffi.DDP_ERR_MISMATCH, f"{self.collective} mismatch: "
                                          + _difference(descriptions[0], description, rank))
        return _ffi.MismatchError(_ffi.DDP_ERR_MISMATCH, libddp_message)

    def _gather(self, data):
        """Every rank's bytes, by rank: two allreduces, as only MAX and SUM exist."""
        comm = self.comm
        lengths = np.zeros(comm.size, dtype=np.int64)
        lengths[comm.rank] = len(data)
        self._allreduce(lengths, _ffi.DDP_OP_SUM)
        table = np.zeros((comm.size, int(lengths.max())), dtype=np.uint8)
        table[comm.rank, :len(data)] = np.frombuffer(data, dtype=np.uint8)
        self._allreduce(table, _ffi.DDP_OP_SUM)
        return [table[rank, :lengths[rank]].tobytes() for rank in range(comm.size)]

    def _allreduce(self, array, op):
        tensors = TensorList([array], writes=True)
        _ffi.ddp_allreduce_tensor_list(self.comm._handle, tensors.array, 1, op,
                                       collective_options(timeout=self.timeout, for_binding=True))


def _shape(leaf):
    try:
        return list(np.shape(leaf))
    except Exception:  # noqa: BLE001 (an object NumPy cannot size: described by type only)
        return None


def _dtype(leaf):
    dtype = getattr(leaf, "dtype", None)
    return str(dtype) if dtype is not None else type(leaf).__name__


def _difference(mine, theirs, rank):
    """The first difference between rank 0's leaves and rank `rank`'s."""
    first = {path: (shape, dtype) for path, shape, dtype in mine}
    other = {path: (shape, dtype) for path, shape, dtype in theirs}
    for path, shape, dtype in mine:
        if path not in other:
            return f"{path} is present on rank 0 but not on rank {rank}"
        other_shape, other_dtype = other[path]
        if (shape, dtype) != (other_shape, other_dtype):
            return (f"{path} is {_text(shape, dtype)} on rank 0 but "
                    f"{_text(other_shape, other_dtype)} on rank {rank}")
    for path, _, _ in theirs:
        if path not in first:
            return f"{path} is present on rank {rank} but not on rank 0"
    return f"rank 0 and rank {rank} hold the same leaves in a different order"


def _text(shape, dtype):
    return f"{dtype} of shape {tuple(shape)}" if shape is not None else dtype
