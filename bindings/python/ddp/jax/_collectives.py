"""libddp's collectives as XLA custom calls, usable inside jax.jit.

Each call is one jax.ffi.ffi_call to a handler registered once per
collective ("ddp_allreduce", ...). The handler runs when XLA runs the
computation: it views the call's buffers as NumPy arrays and makes the same
call the Communicator makes outside jit (comm.allreduce(views, op=...)), so
its checks, its agreement with every rank and its timeout hold in jit too.
The call's tree structure travels with it (as a key to it), so that messages
name leaves by their paths as outside jit, and so do its keyword arguments,
as one JSON string attribute, checked in the handler, in the collective's
place on every rank: a bad op on one rank fails the collective on every rank
at once, as outside jit.
"""
import json
import threading

import jax
import numpy as np

from .. import _ffi
from .._communicator import current_world
from .._jit_order import InsideHandler
from .._ops import op_value
from . import _xla_ffi

_handlers = []  # the registered C handlers, alive while XLA may call them


class _Registry:
    """Objects handed to calls (communicators, tree structures) by an int
    key the call carries as an attribute; the same object, the same key.
    Kept for the process's life: a compiled call may run at any time."""

    def __init__(self):
        self._lock = threading.Lock()  # several threads may trace at once
        self._by_key = {}
        self._keys = {}

    def key(self, value, identity):
        with self._lock:
            key = self._keys.get(identity)
            if key is None:
                key = self._keys[identity] = len(self._by_key)
                self._by_key[key] = value
            return key

    def __getitem__(self, key):
        return self._by_key[key]


_communicators = _Registry()
_structures = _Registry()


def _error_code(error):
    if isinstance(error, _ffi.TimeoutError):
        return _xla_ffi.ERROR_DEADLINE_EXCEEDED
    if isinstance(error, _ffi.MismatchError):
        return _xla_ffi.ERROR_FAILED_PRECONDITION
    if isinstance(error, (ValueError, TypeError)):
        return _xla_ffi.ERROR_INVALID_ARGUMENT
    return _xla_ffi.ERROR_UNKNOWN


def _in_place(method):
    """allreduce and broadcast: the outputs alias the inputs (XLA copies the
    input first where it must), and are reduced where they are."""
    def run(comm, inputs, outputs, tree_of, arguments):
        for source, target in zip(inputs, outputs):
            if isinstance(source, np.ndarray) and source.ctypes.data != target.ctypes.data:
                np.copyto(target, source)
        getattr(comm, method)(tree_of(outputs), **arguments)
    return run


def _into_outputs(method):
    """allgather, reduce_scatter and alltoall: read the inputs, write the outputs."""
    def run(comm, inputs, outputs, tree_of, arguments):
        getattr(comm, method)(tree_of(inputs), out=tree_of(outputs), **arguments)
    return run


_RUNNERS = {"allreduce": _in_place("allreduce"), "broadcast": _in_place("broadcast"),
            "allgather": _into_outputs("allgather"),
            "reduce_scatter": _into_outputs("reduce_scatter"),
            "alltoall": _into_outputs("alltoall")}


def _register():
    for collective, run in _RUNNERS.items():
        def function(inputs, outputs, attributes, run=run):
            comm = _communicators[attributes["comm"]]
            structure = _structures[attributes["tree"]]
            with InsideHandler():
                run(comm, inputs, outputs,
                    lambda views: jax.tree_util.tree_unflatten(structure, views),
                    json.loads(attributes["arguments"]))
        c_handler = _xla_ffi.handler(function, _error_code)
        _handlers.append(c_handler)
        jax.ffi.register_ffi_target(f"ddp_{collective}", jax.ffi.pycapsule(c_handler),
                                    platform="cpu")


_register()


def _call(collective, tree, comm, arguments, result_shape, in_place):
    """The custom call for `tree`'s leaves (float0 leaves, the gradients of
    integers, have no data and are left as they are). What fails here,
    while tracing (a leaf JAX cannot take, vmap or grad of a call that has
    no rule for it), fails on this rank only: it takes part in the
    collective as invalid, as the Communicator's own checks do, so that its
    peers' call raises at once instead of pairing with this rank's next."""
    comm = comm if comm is not None else current_world()
    with comm._checked(collective, timeout=arguments.get("timeout")):
        leaves, structure = jax.tree_util.tree_flatten(tree)
        averaging = "op" in arguments and _averages(arguments["op"])
        arrays = [_array(leaf, averaging) for leaf in leaves]
        taken = [index for index, array in enumerate(arrays)
                 if array.dtype != jax.dtypes.float0]
        if not taken:
            return tree
        operands = [arrays[index] for index in taken]
        results = [jax.ShapeDtypeStruct(result_shape(array.shape, comm.size), array.dtype)
                   for array in operands]
        call = jax.ffi.ffi_call(
            f"ddp_{collective}", results, has_side_effect=True,
            vmap_method="broadcast_all" if in_place else None,
            input_output_aliases={index: index for index in range(len(operands))}
            if in_place else None)
        if len(taken) < len(leaves):  # the handler sees the taken leaves as a list
            structure_of_call = jax.tree_util.tree_structure(list(range(len(operands))))
        else:
            structure_of_call = structure
        outputs = call(*operands, comm=np.int64(_communicators.key(comm, id(comm))),
                       tree=np.int64(_structures.key(structure_of_call, structure_of_call)),
                       arguments=_json(arguments))
    for index, output in zip(taken, outputs):
        arrays[index] = output
    return jax.tree_util.tree_unflatten(structure, arrays)


def _averages(op):
    """Whether op is AVG, read as every call reads ops; a bad op is refused
    by the handler, in the call's place on every rank."""
    try:
        return op_value(op) == _ffi.DDP_OP_AVG
    except ValueError:
        return False


def _array(leaf, averaging):
    """A leaf as a JAX array; a Python int that is averaged becomes a float,
    as in the Communicator's own calls."""
    if averaging and isinstance(leaf, int) and not isinstance(leaf, bool):
        return jax.numpy.asarray(leaf, dtype=jax.numpy.result_type(float))
    return jax.numpy.asarray(leaf)


def _json(arguments):
    """The keyword arguments as the handler passes them on (see _json_value)."""
    return json.dumps({key: _json_value(value) for key, value in arguments.items()})


def _json_value(value):
    """Enums by name (ddp.Op.AVG, an int too; ReduceOp.AVG), NumPy scalars as
    numbers, anything else JSON lacks as its repr (refused in the handler,
    in the call's place)."""
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


def _same(shape, size):
    return shape


def _gathered(shape, size):
    return (size * shape[0], *shape[1:]) if shape else (size,)


def _scattered(shape, size):
    # A first dimension that does not split is refused by the handler's
    # reduce_scatter; the result shape only has to be something until then.
    return (shape[0] // size, *shape[1:]) if shape and shape[0] % size == 0 else shape


def allreduce(tree, op="sum", comm=None, timeout=None):
    """Every leaf of `tree` (JAX arrays or numbers) reduced across ranks with
    op ("sum", "avg", "min", "max", "prod", or ddp.Op): a new tree. Inside
    jax.jit or outside."""
    return _call("allreduce", tree, comm, {"op": op, "timeout": timeout}, _same, True)


def broadcast(tree, root=0, comm=None, timeout=None):
    """root's value of every leaf of `tree`, on every rank: a new tree."""
    return _call("broadcast", tree, comm, {"root": root, "timeout": timeout}, _same, True)


def allgather(tree, comm=None, timeout=None):
    """Every rank's leaves concatenated in rank order along the first
    dimension: (d0, *rest) gives (size × d0, *rest), a scalar (size,)."""
    return _call("allgather", tree, comm, {"timeout": timeout}, _gathered, False)


def reduce_scatter(tree, op="sum", comm=None, timeout=None):
    """Every leaf reduced across ranks, and this rank's block of rows of each
    result: (d0, *rest) gives (d0 / size, *rest); d0 must split evenly."""
    return _call("reduce_scatter", tree, comm, {"op": op, "timeout": timeout}, _scattered, False)


def alltoall(tree, comm=None, timeout=None):
    """Every leaf's size equal blocks exchanged between the ranks (the token
    exchange of mixture-of-experts layers): block j of this rank's leaf goes
    to rank j, and block r of the result, of the leaf's shape, is rank r's
    block for this rank; the element count must split evenly."""
    return _call("alltoall", tree, comm, {"timeout": timeout}, _same, False)
