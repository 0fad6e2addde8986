"""libddp's collectives as XLA custom calls, usable inside jax.jit.

Each call is one jax.ffi.ffi_call to a handler registered once per
collective ("ddp_allreduce", ...). The handler runs when XLA runs the
computation: it views the call's buffers as NumPy arrays and makes the same
call the Communicator makes outside jit (comm.allreduce(views, op=...)), so
its checks, its agreement with every rank and its timeout hold in jit too.
The call's tree structure travels too (as a key to it), so that messages
name leaves by their paths as outside jit. The call's keyword arguments
travel as one JSON string attribute and are checked there, at run time, in the collective's place on every rank: a bad
op on one rank fails the collective on every rank at once, as outside jit.
"""
import json

import jax
import numpy as np

from .. import _ffi
from .._communicator import current_world
from . import _xla_ffi

# The communicators and tree structures handed to calls, by keys the call
# carries as attributes.
_communicators = {}
_structures = {}
_handlers = []  # the registered C handlers, alive while XLA may call them


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
            if source.ctypes.data != target.ctypes.data:
                np.copyto(target, source)
        getattr(comm, method)(tree_of(outputs), **arguments)
    return run


def _into_outputs(method):
    """allgather and reduce_scatter: read the inputs, write the outputs."""
    def run(comm, inputs, outputs, tree_of, arguments):
        getattr(comm, method)(tree_of(inputs), out=tree_of(outputs), **arguments)
    return run


_RUNNERS = {"allreduce": _in_place("allreduce"), "broadcast": _in_place("broadcast"),
            "allgather": _into_outputs("allgather"),
            "reduce_scatter": _into_outputs("reduce_scatter")}


def _register():
    for collective, run in _RUNNERS.items():
        def function(inputs, outputs, attributes, run=run):
            comm = _communicators[attributes["comm"]]
            structure = _structures[attributes["tree"]]
            run(comm, inputs, outputs, lambda views: jax.tree_util.tree_unflatten(structure, views),
                json.loads(attributes["arguments"]))
        c_handler = _xla_ffi.handler(function, _error_code)
        _handlers.append(c_handler)
        jax.ffi.register_ffi_target(f"ddp_{collective}", jax.ffi.pycapsule(c_handler),
                                    platform="cpu")


_register()


def _key(registry, value):
    """value's key in registry (the same value, the same key)."""
    for key, known in registry.items():
        if known is value or known == value:
            return key
    key = len(registry)
    registry[key] = value
    return key


def _call(collective, tree, comm, arguments, result_shape, in_place):
    comm = comm if comm is not None else current_world()
    leaves, structure = jax.tree_util.tree_flatten(tree)
    leaves = [jax.numpy.asarray(leaf) for leaf in leaves]
    if not leaves:
        return tree
    results = [jax.ShapeDtypeStruct(result_shape(leaf.shape, comm.size), leaf.dtype)
               for leaf in leaves]
    call = jax.ffi.ffi_call(
        f"ddp_{collective}", results, has_side_effect=True,
        vmap_method="broadcast_all" if in_place else None,
        input_output_aliases={index: index for index in range(len(leaves))} if in_place else None)
    outputs = call(*leaves, comm=np.int64(_key(_communicators, comm)),
                   tree=np.int64(_key(_structures, structure)), arguments=_json(arguments))
    return jax.tree_util.tree_unflatten(structure, outputs)


def _json(arguments):
    """The keyword arguments as the handler passes them on: enums by name,
    anything JSON lacks as its repr (refused there, in the call's place)."""
    def plain(value):
        name = getattr(value, "name", None)  # ddp.Op.AVG (an int too), ReduceOp.AVG
        if isinstance(name, str):
            return name
        if isinstance(value, (bool, int, float, str)) or value is None:
            return value
        return repr(value)
    return json.dumps({key: plain(value) for key, value in arguments.items()})


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
