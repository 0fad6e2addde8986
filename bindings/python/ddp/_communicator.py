"""ddp.init() and the Communicator: the collectives on trees of arrays.

Every collective takes one array, a list of them, or any tree (dicts, lists,
tuples, dataclasses, JAX pytrees) of arrays and numbers, and makes one libddp
call for all of its leaves. Mutable arrays are reduced in place; JAX arrays
and numbers come back as new values in the returned tree. The op defaults to
"sum" everywhere, as in MPI, mpi4py and torch.distributed; averaging is asked
for by name (op="avg") or through allreduce_gradients.
"""
import ctypes
import functools
import re
import sys
import threading

import numpy as np

from . import _exit, _ffi, _group, _leaf_names, _log_bridge, _trees
from ._agreement import CheckedCall, collective_options, seconds, timeout_seconds
from ._jit_order import wait_for_jitted_collectives
from ._ops import op_value
from ._staging import Staging, is_immutable_array, is_number
from ._tensors import NUMPY_NAME_OF_DTYPE, numpy_dtype
from ._reducer import Reducer

BACKEND_OF_NAME = {"auto": _ffi.DDP_BACKEND_AUTO, "self": _ffi.DDP_BACKEND_SELF,
                   "mpi": _ffi.DDP_BACKEND_MPI, "nccl": _ffi.DDP_BACKEND_NCCL}

_world = None


def current_world():
    """The communicator ddp.init() returned, while it is not finalized."""
    if _world is None or _world.finalized:
        raise RuntimeError("no ddp communicator: call ddp.init() first")
    return _world


def _root(root):
    """root as libddp takes it (an int32); whether it is a rank, libddp checks."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or \
            not -2**31 <= root < 2**31:
        raise TypeError(f"root {root!r}: expected a rank (an int)")
    return int(root)


def stream_handle(stream):
    """The cudaStream_t of `stream` as an int: None is CUDA's legacy default
    stream (0), an int is taken as the handle itself, and stream objects give
    theirs (CuPy's .ptr, PyTorch's .cuda_stream)."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attribute in ("ptr", "cuda_stream"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"stream: expected None, an int (a cudaStream_t) or a CUDA stream object "
                    f"(CuPy, PyTorch), got {type(stream).__name__}")



def _allreduce_arguments(call, tensors, op, fusion_bytes, stream, timeout):
    """What allreduce and allreduce_async hand libddp: the tree's leaves staged
    as a tensor list, the op and the options; and how to rebuild the tree."""
    leaves, rebuild = _trees.flatten(tensors)
    reduce_op = op_value(op)
    stream = stream_handle(stream)
    staging = Staging(leaves, writes=True, averaging=reduce_op == _ffi.DDP_OP_AVG)
    tensor_list = call.tensor_list(staging.buffers, True, stream)
    options = collective_options(fusion_bytes, stream, timeout, _leaf_names.of(tensors, leaves))
    return rebuild, reduce_op, staging, tensor_list, options

# allgather's and alltoall's place for the op they do not take (None is a bad op).
_NO_OP = object()


def _sharded_arguments(call, tensors, out, fusion_bytes, stream, timeout):
    """What allgather, reduce_scatter and alltoall (blocking or async) hand
    libddp: the tree's leaves as inputs (only read), the outputs (out's
    leaves, or NumPy arrays made here), the options; and a function making
    the returned tree. Each result's shape is call.collective's."""
    leaves, rebuild = _trees.flatten(tensors)
    stream = stream_handle(stream)
    inputs = call.tensor_list(Staging(leaves, writes=False).buffers, False, stream)
    size = call.comm.size
    shapes = [_result_shape(np.shape(leaf), size, call.collective, call.leaf_name(index))
              for index, leaf in enumerate(leaves)]
    if out is None:
        results = [_new_result(inputs.array[index], shape, call.leaf_name(index))
                   for index, shape in enumerate(shapes)]
        outputs = call.output_list(results, stream)
        finish = functools.partial(rebuild, results)
    else:
        out_leaves, rebuild_out = _trees.flatten(out)
        if len(out_leaves) != len(leaves):
            raise ValueError(f"out has {len(out_leaves)} leaves but {call.name} has "
                             f"{len(leaves)}: pass a tree of the same structure")
        staging = Staging(out_leaves, writes=True)
        outputs = call.output_list(staging.buffers, stream, out)
        for index, (out_leaf, shape) in enumerate(zip(out_leaves, shapes)):
            _check_result(call, index, out_leaf, outputs.array[index], inputs.array[index], shape)
        finish = functools.partial(staging.rebuilt, out, rebuild_out)
    options = collective_options(fusion_bytes, stream, timeout, _leaf_names.of(tensors, leaves))
    return inputs, outputs, options, finish


def _result_shape(shape, size, collective, where):
    """allgather's leaf: (size × d0, *rest), a 0-d one (size,), as
    torch.distributed.all_gather_into_tensor; reduce_scatter's: (d0 / size,
    *rest), so each rank's shard is whole rows of the first dimension;
    alltoall's: the leaf's own shape, as torch.distributed.all_to_all_single
    (whether its element count splits into equal blocks is libddp's to check)."""
    if collective == "allgather":
        return (size * shape[0], *shape[1:]) if shape else (size,)
    if collective == "alltoall":
        return tuple(shape)
    if not shape:
        raise ValueError(f"{where}: a 0-d leaf has no first dimension to share between the ranks")
    if shape[0] % size:
        raise ValueError(f"{where}: its first dimension ({shape[0]}) is not a multiple of the "
                         f"{size} ranks reduce_scatter shares it between (each rank gets an equal "
                         f"shard: pad it to {-(-shape[0] // size) * size})")
    return (shape[0] // size, *shape[1:])


def _new_result(tensor, shape, where):
    if tensor.device_type != _ffi.DDP_DEVICE_CPU:
        raise ValueError(f"{where}: results are made here in host memory only; for arrays in "
                         "device memory, pass out=")
    return np.empty(shape, numpy_dtype(tensor.dtype, where))


def _check_result(call, index, out_leaf, output, tensor, shape):
    """The shape and dtype out's leaf needs, checked here so that the message
    names both leaves (libddp compares element counts and dtypes only)."""
    out_shape = tuple(np.shape(out_leaf))
    if out_shape != shape:
        raise ValueError(f"{call.output_name(index)}: shape {out_shape}, but {call.collective} of "
                         f"{call.leaf_name(index)} on {call.comm.size} ranks gives shape {shape}")
    if output.dtype != tensor.dtype:
        raise TypeError(f"{call.output_name(index)}: dtype {NUMPY_NAME_OF_DTYPE[output.dtype]}, "
                        f"but {call.leaf_name(index)} is {NUMPY_NAME_OF_DTYPE[tensor.dtype]}")


def init(comm=None, backend="auto", timeout=None, log_to_python=True, hang_watchdog=None):
    """Starts libddp and returns the world Communicator. It is finalized at
    interpreter exit unless the program finalizes it first (finalize(), or
    `with ddp.init() as comm:`). Without a launcher it is a single rank, and
    says so once.

    comm: an mpi4py communicator to adopt (libddp duplicates it; MPI stays
    initialized after finalize). backend: "auto", "self", "mpi" or "nccl".
    timeout: seconds a collective waits for every rank (None or 0: DDP_TIMEOUT_S,
    else 1800; as for every timeout here, libddp refuses a negative, NaN or
    infinite one with InvalidArgumentError). log_to_python: libddp's log lines
    are printed on stderr until the program configures logging, then go to
    logging.getLogger("ddp"); False leaves them to libddp (stderr).
    hang_watchdog: seconds past a call's deadline that its thread may stay
    inside MPI before the process is aborted with a message naming the call,
    so that the launcher ends the job (None or 0: DDP_HANG_WATCHDOG_S, else
    60); False (or a negative number) turns it off. As in C: libddp refuses a
    NaN or infinite one (InvalidArgumentError); one that is no number (a str,
    True) is a TypeError."""
    global _world
    if backend not in BACKEND_OF_NAME:
        raise ValueError(f"backend {backend!r}: expected one of {', '.join(BACKEND_OF_NAME)}")
    options = _ffi.ddp_init_options()
    _ffi.ddp_init_options_init(options, ctypes.sizeof(options))
    options.backend = BACKEND_OF_NAME[backend]
    if comm is not None:
        if not hasattr(comm, "py2f"):
            raise TypeError(f"comm: expected an mpi4py communicator, got {type(comm).__name__}")
        options.mpi_comm_fortran = comm.py2f()
    if timeout is not None:
        options.timeout_s = timeout_seconds(timeout, "DDP_TIMEOUT_S, else 1800")
    # As in C (ddp_init_options.hang_watchdog_s): 0 is the default, < 0 off;
    # libddp refuses a NaN or infinite one.
    options.hang_watchdog_s = -1.0 if hang_watchdog is False else seconds(
        hang_watchdog, "hang_watchdog", "None or 0: DDP_HANG_WATCHDOG_S, else 60; False or < 0: off")
    if log_to_python:
        _log_bridge.route_to_logging()
    handle = ctypes.POINTER(_ffi.ddp_comm)()
    _ffi.ddp_init(options, handle)
    _world = Communicator(handle)
    _exit.finalize_at_exit(_world)
    if backend == "auto" and comm is None and _world.backend == "self":
        _tell_single_rank_once()
    return _world


def init_local(n, timeout=None, log_to_python=True, devices=None):
    """Starts n ranks of one group inside this process (experimental) and
    returns their Communicators, rank i at index i: for a program that
    drives several replicas from threads, without a launcher or MPI
    (Conflux.jl's way). Use each from one thread at a time; libddp releases
    the GIL inside every call, so the threads' collectives meet, and
    everything that holds across processes holds between them (a thread
    passing another list raises MismatchError on every rank, a thread that
    never calls is named in its peers' TimeoutError). split() makes
    sub-groups of threads. End each with finalize(), which waits for no peer
    (a peer's later call raises naming the rank); ranks left are finalized
    at interpreter exit. timeout and log_to_python: as for init().
    devices: None for host arrays only, or n CUDA device ids: rank i then
    runs NCCL on GPU devices[i] for GPU arrays (CuPy, torch) as the nccl
    backend does (ranks sharing a GPU need NCCL 2.30 or newer with
    NCCL_MULTI_RANK_GPU_ENABLE=1); UnsupportedError says why where it cannot.
    Under mpirun every process's n threads are ranks of one group across
    the processes (rank = MPI rank x n + i), devices[i] being each process's
    GPU for its thread i."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n: expected an int (the number of ranks), got {type(n).__name__}")
    options = _ffi.ddp_init_options()
    _ffi.ddp_init_options_init(options, ctypes.sizeof(options))
    if timeout is not None:
        options.timeout_s = timeout_seconds(timeout, "DDP_TIMEOUT_S, else 1800")
    ids = None
    if devices is not None:
        devices = list(devices)
        if len(devices) != n:
            raise ValueError(f"devices: expected one CUDA device id per rank ({n}), got {len(devices)}")
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not -2**31 <= d < 2**31
               for d in devices):
            raise TypeError(f"devices: expected CUDA device ids (ints), got {devices!r}")
        ids = (ctypes.c_int32 * n)(*devices)
    if log_to_python:
        _log_bridge.route_to_logging()
    # Room for at least one: libddp names a bad n itself.
    handles = (ctypes.POINTER(_ffi.ddp_comm) * max(n, 1))()
    _ffi.ddp_init_local(n, ids, options, handles)
    group = [Communicator(handles[i]) for i in range(n)]
    _exit.finalize_group_at_exit(group)
    return group


_told_single_rank = False


def _tell_single_rank_once():
    """No launcher started this process: say so once, with how to start more."""
    global _told_single_rank
    if not _told_single_rank:
        _told_single_rank = True
        script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c") else "script.py"
        _log_bridge.notice(f"ddp: no MPI launcher found, so this process is the only rank "
                           f"(rank 0 of 1). To train on N processes, start it with: "
                           f"mpirun -np N python {script}")


class Communicator:
    """A process group. Collectives must be called in the same order on every
    rank; one that gets different arguments on different ranks raises
    MismatchError on all of them."""

    def __init__(self, handle):
        self._handle = handle
        self.finalized = False
        self.rank = self._query(_ffi.ddp_rank)
        self.size = self._query(_ffi.ddp_size)
        self.local_rank = self._query(_ffi.ddp_local_rank)
        self.local_size = self._query(_ffi.ddp_local_size)
        self.device = self._query(_ffi.ddp_device)
        name = ctypes.c_char_p()
        _ffi.ddp_backend_name(handle, name)
        self.backend = name.value.decode()

    def _query(self, function):
        value = ctypes.c_int32()
        function(self._handle, value)
        return value.value

    def __repr__(self):
        state = "finalized" if self.finalized else f"{self.backend}, device {self.device}"
        return f"<ddp.Communicator rank {self.rank} of {self.size} ({state})>"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        # After an exception on several ranks, finalizing here could wait for
        # peers still inside a collective; the exit hook decides (ddp/_exit.py).
        if exc_type is None or self.size == 1:
            self.finalize()

    def finalize(self):
        """Ends the communicator (idempotent); MPI ends too if libddp started it.
        Called at interpreter exit if the program does not call it."""
        _group.refuse_inside("finalize", "it waits for the group's calls, which run as the block ends")
        wait_for_jitted_collectives()
        _ffi.ddp_finalize(self._handle)
        self.finalized = True
        _free_finished_abandoned()

    def _checked(self, collective, tree=None, name=None, timeout=None):
        """`with` around a collective's argument checks: see ddp/_agreement.py."""
        return CheckedCall(self, collective, tree, name, timeout)

    def allreduce(self, tensors, op="sum", fusion_bytes=None, stream=None, timeout=None):
        """Reduces every leaf of tensors (an array, a number, or a tree of them)
        across ranks and returns the result: arrays that can be written are
        reduced in place (the same objects come back), JAX arrays and numbers
        come back as new values. op: "sum" (the default), "avg" (floating
        types; a Python int averages as a float), "min", "max", "prod".
        stream: for GPU arrays (CuPy, PyTorch), the CUDA stream the call is
        ordered on (default: the legacy default stream); see ddp.h.
        timeout: seconds this call may take (None or 0: the communicator's)."""
        with self._checked("allreduce", tensors, "tensors", timeout) as call:
            tensors = call.tree  # read here: see CheckedCall.tree
            rebuild, reduce_op, staging, tensor_list, options = _allreduce_arguments(
                call, tensors, op, fusion_bytes, stream, timeout)
        call.run(_ffi.ddp_allreduce_tensor_list, self._handle, tensor_list.array,
                 len(tensor_list), reduce_op, options)
        return _group.result_of(lambda: staging.rebuilt(tensors, rebuild), tensor_list)

    def allreduce_gradients(self, gradients, fusion_bytes=None, stream=None, timeout=None):
        """The mean of the gradients over ranks (allreduce with op="avg"), as
        FluxMPI's allreduce_gradients and Horovod's DistributedOptimizer."""
        return self.allreduce(gradients, op="avg", fusion_bytes=fusion_bytes, stream=stream,
                              timeout=timeout)

    def reducer(self, like, op="avg", fusion_bytes=None, timeout=None):
        """Persistent gradient buckets for arrays shaped like `like` (an array,
        a list or any tree of them): the way to reduce gradients every step.
        Experimental in libddp's C API (ddp_reducer_*). See ddp.Reducer.
        timeout: seconds each step (and the creation) may take (None or 0: the
        communicator's)."""
        return Reducer(self, like, op, fusion_bytes, timeout)

    def allreduce_async(self, tensors, op="sum", fusion_bytes=None, stream=None, timeout=None):
        """Starts allreduce in the background; returns a Request whose wait()
        gives what allreduce would have returned. Leave the arrays alone until
        then. GPU arrays: see allreduce's stream, and Request.wait_on(stream)."""
        _group.refuse_inside("allreduce_async", "inside the block every call is already asynchronous")
        _free_finished_abandoned()
        with self._checked("allreduce", tensors, "tensors", timeout) as call:
            tensors = call.tree  # read here: see CheckedCall.tree
            rebuild, reduce_op, staging, tensor_list, options = _allreduce_arguments(
                call, tensors, op, fusion_bytes, stream, timeout)
        request = ctypes.POINTER(_ffi.ddp_request)()
        _ffi.ddp_allreduce_tensor_list_async(self._handle, tensor_list.array, len(tensor_list),
                                             reduce_op, options, request)
        return Request(request, lambda: staging.rebuilt(tensors, rebuild), tensor_list)

    def broadcast(self, tensors, root=0, stream=None, timeout=None):
        """Gives every leaf of tensors root's value and returns the result:
        writable arrays are overwritten in place, JAX arrays and numbers come
        back as new values (broadcast(params_dict) works on any tree)."""
        with self._checked("broadcast", tensors, "tensors", timeout) as call:
            tensors = call.tree  # read here: see CheckedCall.tree
            leaves, rebuild = _trees.flatten(tensors)
            stream = stream_handle(stream)
            staging = Staging(leaves, writes=True)
            tensor_list = call.tensor_list(staging.buffers, True, stream)
            options = collective_options(None, stream, timeout, _leaf_names.of(tensors, leaves))
            root = _root(root)
        call.run(_ffi.ddp_broadcast_tensor_list, self._handle, tensor_list.array,
                 len(tensor_list), root, options)
        return _group.result_of(lambda: staging.rebuilt(tensors, rebuild), tensor_list)

    def reduce(self, tensors, op="sum", root=0, stream=None, timeout=None):
        """Reduces into root's leaves (returned as allreduce returns them); other
        ranks' leaves are left as they were."""
        with self._checked("reduce", tensors, "tensors", timeout) as call:
            tensors = call.tree  # read here: see CheckedCall.tree
            leaves, rebuild = _trees.flatten(tensors)
            reduce_op = op_value(op)
            stream = stream_handle(stream)
            staging = Staging(leaves, writes=True, averaging=reduce_op == _ffi.DDP_OP_AVG)
            tensor_list = call.tensor_list(staging.buffers, True, stream)
            options = collective_options(None, stream, timeout, _leaf_names.of(tensors, leaves))
            root = _root(root)
        call.run(_ffi.ddp_reduce_tensor_list, self._handle, tensor_list.array, len(tensor_list),
                 reduce_op, root, options)
        return _group.result_of(lambda: staging.rebuilt(tensors, rebuild), tensor_list)

    def _sharded(self, collective, c_function, tensors, out, op, fusion_bytes, stream, timeout,
                 asynchronous=False):
        """allgather's, reduce_scatter's or alltoall's call (op: _NO_OP for
        the two that take none) through c_function: blocking, or its _async
        form returning a Request. Everything is read inside the checks, so
        that a mistake on one rank fails its peers at once."""
        if asynchronous:
            _group.refuse_inside(f"{collective}_async", "inside the block every call is already asynchronous")
            _free_finished_abandoned()
        with self._checked(collective, tensors, "tensors", timeout) as call:
            tensors, out = call.tree, _trees.materialized(out)  # read here: see CheckedCall.tree
            reduce_op = () if op is _NO_OP else (op_value(op),)
            inputs, outputs, options, finish = _sharded_arguments(
                call, tensors, out, fusion_bytes, stream, timeout)
        arguments = (self._handle, inputs.array, outputs.array, len(inputs), *reduce_op, options)
        if not asynchronous:
            call.run(c_function, *arguments)
            return _group.result_of(finish, (inputs, outputs))
        request = ctypes.POINTER(_ffi.ddp_request)()
        call.run(c_function, *arguments, request)
        return Request(request, finish, (inputs, outputs))

    def allgather(self, tensors, out=None, *, fusion_bytes=None, stream=None, timeout=None):
        """Every rank's leaves of tensors (an array, a number or a tree of them),
        concatenated in rank order along the first dimension: a leaf of shape
        (d0, *rest) gives (size × d0, *rest), a number or 0-d array (size,),
        as torch.distributed.all_gather_into_tensor. Returns a tree of the same
        structure: new NumPy arrays, or out's leaves written in place (out: a
        tree of the same structure; a JAX leaf there comes back as a new
        value). A leaf may be this rank's block of its out leaf (in place).
        The inputs are only read. timeout: as allreduce's."""
        return self._sharded("allgather", _ffi.ddp_allgather_tensor_list, tensors, out, _NO_OP,
                             fusion_bytes, stream, timeout)

    def allgather_async(self, tensors, out=None, *, fusion_bytes=None, stream=None, timeout=None):
        """Starts allgather in the background; returns a Request whose wait()
        gives what allgather would have returned. Leave the arrays alone until
        then."""
        return self._sharded("allgather", _ffi.ddp_allgather_tensor_list_async, tensors, out, _NO_OP,
                             fusion_bytes, stream, timeout, asynchronous=True)

    def reduce_scatter(self, tensors, op="sum", out=None, *, fusion_bytes=None, stream=None,
                       timeout=None):
        """Reduces every leaf of tensors across ranks with op (as allreduce) and
        returns this rank's shard of each result: rows [rank × d0 / size,
        (rank + 1) × d0 / size) of a leaf of shape (d0, *rest), so its shape is
        (d0 / size, *rest); a first dimension that is not a multiple of size is
        a ValueError (pad it). The tree that comes back is new NumPy arrays, or
        out's leaves written in place, as allgather's. The inputs are only
        read: the gradient half of ZeRO and FSDP, allgather the parameter half."""
        return self._sharded("reduce_scatter", _ffi.ddp_reduce_scatter_tensor_list, tensors, out, op,
                             fusion_bytes, stream, timeout)

    def reduce_scatter_async(self, tensors, op="sum", out=None, *, fusion_bytes=None,
                             stream=None, timeout=None):
        """Starts reduce_scatter in the background; returns a Request whose
        wait() gives what reduce_scatter would have returned."""
        return self._sharded("reduce_scatter", _ffi.ddp_reduce_scatter_tensor_list_async, tensors, out, op,
                             fusion_bytes, stream, timeout, asynchronous=True)

    def alltoall(self, tensors, out=None, *, fusion_bytes=None, stream=None, timeout=None):
        """Exchanges blocks of every leaf of tensors between every pair of
        ranks, as torch.distributed.all_to_all_single and MPI_Alltoall (the
        token exchange of mixture-of-experts layers): a leaf of n elements is
        size blocks of n / size (whole rows of the first dimension when it is
        a multiple of size); block j goes to rank j, and block r of the
        result is rank r's block for this rank, in rank order. Each result
        has its leaf's shape and dtype. An element count that is not a
        multiple of size is libddp's InvalidArgumentError naming the leaf.
        The tree that comes back is new NumPy arrays, or out's leaves written
        in place, as allgather's; the inputs are only read (and must not
        overlap out). timeout: as allreduce's."""
        return self._sharded("alltoall", _ffi.ddp_alltoall_tensor_list, tensors, out, _NO_OP,
                             fusion_bytes, stream, timeout)

    def alltoall_async(self, tensors, out=None, *, fusion_bytes=None, stream=None, timeout=None):
        """Starts alltoall in the background; returns a Request whose wait()
        gives what alltoall would have returned. Leave the arrays alone until
        then."""
        return self._sharded("alltoall", _ffi.ddp_alltoall_tensor_list_async, tensors, out, _NO_OP,
                             fusion_bytes, stream, timeout, asynchronous=True)

    def sync_optimizer_state(self, state, root=0, stream=None, timeout=None):
        """Makes state equal root's and returns it: writable arrays are overwritten
        in place, JAX arrays and numbers (step counts, learning rates) come back
        in the returned tree; strings and bytes (configuration) are left alone.
        Raises MismatchError on every rank, naming the first differing leaf by
        its path, if the structures (paths, shapes, dtypes) differ."""
        _group.refuse_inside("sync_optimizer_state", "its structure check answers at once")
        with self._checked("sync_optimizer_state", state, "state", timeout) as call:
            state = call.tree  # read here: see CheckedCall.tree
            leaves, rebuild = _trees.flatten(state)
            kinds = [_state_leaf_kind(leaf, call.leaf_name(index)) for index, leaf in enumerate(leaves)]
            array_indices = [index for index, kind in enumerate(kinds) if kind == "array"]
            stream = stream_handle(stream)
            staging = Staging([leaves[index] for index in array_indices], writes=True)
            tensor_list = call.tensor_list(staging.buffers, True, stream, array_indices)
            numbers = [leaf for leaf, kind in zip(leaves, kinds) if kind == "number"]
            values = (ctypes.c_double * len(numbers))(*[float(number) for number in numbers])
            options = collective_options(None, stream, timeout)
            root = _root(root)
        call.run(_ffi.ddp_sync_optimizer_state, self._handle, tensor_list.array, len(tensor_list),
                 values, len(numbers), root, options)
        call.check_structure()
        synced_arrays, synced_numbers = iter(staging.results()), iter(values)
        results = [next(synced_arrays) if kind == "array" else
                   type(leaf)(next(synced_numbers)) if kind == "number" else leaf
                   for leaf, kind in zip(leaves, kinds)]
        if all(result is leaf for result, leaf in zip(results, leaves)):
            return state
        return rebuild(results)

    def check_replicas(self, tensors, stream=None, timeout=None):
        """Whether every rank holds bitwise the same leaves (arrays, numbers, any
        tree of them); the result is falsy when not, and its message names the
        first differing leaf (by its path) and two ranks."""
        _group.refuse_inside("check_replicas")
        with self._checked("check_replicas", tensors, "tensors", timeout) as call:
            tensors = call.tree  # read here: see CheckedCall.tree
            leaves, _ = _trees.flatten(tensors)
            stream = stream_handle(stream)
            staging = Staging(leaves, writes=False)
            tensor_list = call.tensor_list(staging.buffers, False, stream)
            options = collective_options(None, stream, timeout)
        identical = ctypes.c_int32()
        call.run(_ffi.ddp_check_replicas, self._handle, tensor_list.array, len(tensor_list),
                 options, identical)
        if identical.value:
            return ReplicaCheck(True, "")
        message = _ffi.ddp_last_error_message().decode()
        return ReplicaCheck(False, re.sub(r"\btensor (\d+)",
                                          lambda found: call.leaf_name(int(found.group(1))), message))

    def split(self, color, key=0, timeout=None):
        """Splits this communicator as MPI_Comm_split: the ranks passing the
        same color (an int >= 0) form one SubCommunicator, ranked by key (ties:
        by their rank here), which is returned; a rank passing color=None (or
        -1, C's DDP_COLOR_UNDEFINED) joins none and gets None. timeout: seconds for the sub-communicator's
        collectives (None or 0: this communicator's); the split itself is held to
        this communicator's. Collective: a bad color, key or timeout on one rank
        raises there and a MismatchError naming that rank on every peer.
        Release it with free() or `with comm.split(...) as sub:`."""
        _group.refuse_inside("split", "it returns the sub-communicator at once")
        with self._checked("comm_split"):
            options = _split_options(timeout)
            arguments = (_color(color), _key(key))
        return _sub_communicator(_ffi.ddp_comm_split, self._handle, *arguments, options)

    def split_node(self, timeout=None):
        """The ranks of this communicator on this rank's node (shared memory),
        ranked as here, as a SubCommunicator: for hierarchical work (reduce
        within the node, then across nodes). Every rank gets one. Collective;
        timeout as split's."""
        _group.refuse_inside("split_node", "it returns the sub-communicator at once")
        with self._checked("comm_split_node"):
            options = _split_options(timeout)
        return _sub_communicator(_ffi.ddp_comm_split_node, self._handle, options)

    def barrier(self, timeout=None):
        """Returns when every rank has called it (or raises TimeoutError past
        timeout seconds; None or 0: the communicator's); inside ddp.group(),
        the block's end does."""
        with self._checked("barrier", timeout=timeout):
            options = collective_options(timeout=timeout)
        _ffi.ddp_barrier(self._handle, options)

    def log(self, message, level="info"):
        """Prints one rank-prefixed line, as FluxMPI's fluxmpi_println: on stderr,
        or through logging.getLogger("ddp") once the program configures logging."""
        _ffi.ddp_log(self._handle, _log_bridge.ddp_level(level), str(message).encode())


class SubCommunicator(Communicator):
    """A process group from Communicator.split() or split_node(): every
    collective, async request and reducer of a Communicator, on its ranks
    only, with its own timeout and its own failures (a timeout in it leaves
    the world and other sub-communicators working; its messages name it).

    free() releases it (collective over its ranks, as MPI_Comm_free); `with
    comm.split(color) as sub:` frees it at the end of the block. It is
    never freed from the garbage collector, because ranks collect at
    different moments: one left unreferenced stays live in libddp until the
    world is finalized, which frees every sub-communicator still live. Once
    freed (or once its world is finalized) every call on it raises
    NotInitializedError; free() again does nothing."""

    def __repr__(self):
        state = "freed" if self.freed else f"{self.backend}, device {self.device}"
        return f"<ddp.SubCommunicator rank {self.rank} of {self.size} ({state})>"

    @property
    def freed(self):
        """Whether free() or the world's finalize released it."""
        try:
            self._query(_ffi.ddp_rank)
        except _ffi.NotInitializedError:
            return True
        return False

    def __exit__(self, exc_type, *exc):
        # Unlike the world's: free tells peers still inside a collective on it
        # that this rank has left (they fail at once), and never ends MPI.
        self.free()

    def free(self):
        """Releases the sub-communicator after its async requests finish.
        Collective over its ranks; a second call does nothing."""
        _group.refuse_inside("free", "it waits for the group's calls, which run as the block ends")
        wait_for_jitted_collectives()
        _ffi.ddp_comm_free(self._handle)

    def finalize(self):
        """Refused: a sub-communicator is released with free(); finalize() ends the world."""
        raise _ffi.InvalidArgumentError(_ffi.DDP_ERR_INVALID_ARGUMENT,
                                        "finalize() ends the world communicator; release a "
                                        "sub-communicator with free() (or a with block)")


def _sub_communicator(split, *arguments):
    """A SubCommunicator from ddp_comm_split or ddp_comm_split_node, or None
    where this rank joined none."""
    handle = ctypes.POINTER(_ffi.ddp_comm)()
    split(*arguments, handle)
    return SubCommunicator(handle) if handle else None


def _color(color):
    """split's color as libddp takes it, a C int32: None joins no
    sub-communicator (DDP_COLOR_UNDEFINED, -1, as in C). Only what an int32
    needs is checked here (an int that fits); the value is libddp's to
    check, as for a C caller: ddp_comm_split refuses a negative color other
    than -1 with its own message, telling the peers first."""
    if color is None:
        return _ffi.DDP_COLOR_UNDEFINED
    if isinstance(color, bool) or not isinstance(color, (int, np.integer)):
        raise TypeError(f"color {color!r}: expected an int >= 0, or None to join no "
                        "sub-communicator")
    if not -2**31 <= color < 2**31:
        raise ValueError(f"color {color!r}: expected an int >= 0 that fits in 32 bits, or None "
                         "to join no sub-communicator")
    return int(color)


def _key(key):
    if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
        raise TypeError(f"key {key!r}: expected an int (ranks are ordered by it)")
    if not -2**31 <= key < 2**31:
        raise ValueError(f"key {key!r}: expected an int that fits in 32 bits")
    return int(key)


def _split_options(timeout):
    """The ddp_split_options of a sub-communicator with `timeout` (None or 0: its parent's)."""
    options = _ffi.ddp_split_options()
    _ffi.ddp_split_options_init(options, ctypes.sizeof(options))
    if timeout is not None:
        options.timeout_s = timeout_seconds(timeout, "the parent's")
    return options


def _state_leaf_kind(leaf, name):
    if is_number(leaf):
        return "number"
    if isinstance(leaf, (str, bytes)):
        return "kept"
    if is_immutable_array(leaf) or _is_array(leaf):
        return "array"
    raise TypeError(f"{name}: cannot synchronize a {type(leaf).__name__}; optimizer "
                    "state holds arrays, numbers, strings, and dicts, lists, tuples or "
                    "dataclasses of them")


def _is_array(value):
    return hasattr(value, "__array_interface__") or hasattr(value, "__dlpack__") or \
        hasattr(value, "__cuda_array_interface__")


class Request:
    """A collective in flight (allreduce, allgather, reduce_scatter, alltoall). wait()
    returns its result or raises its error."""

    def __init__(self, handle, result, tensor_list):
        self._handle = handle
        self._result = result  # makes the returned tree once the data is there
        self._tensors = None
        self._tensor_list = tensor_list  # keeps the memory alive until freed

    def done(self):
        """True once complete (raises the operation's error, if any); never blocks."""
        if not self._handle:
            return True
        finished = ctypes.c_int32()
        _ffi.ddp_request_test(self._handle, finished)
        return bool(finished.value)

    def wait_on(self, stream=None):
        """Makes a CUDA stream (default: the legacy default stream) wait for this
        request without blocking the host, where it runs on the GPU (GPU arrays
        with the nccl backend); otherwise waits here. Experimental in libddp's
        C API (ddp_request_stream_wait). Call wait() later to get the result."""
        if self._handle:
            _ffi.ddp_request_stream_wait(self._handle, stream_handle(stream) or None)

    def wait(self):
        """Blocks until complete; returns the result or raises the error."""
        if self._handle:
            handle, self._handle = self._handle, None
            _ffi.ddp_request_free(handle)  # waits, then frees; raises on failure
            self._tensors = self._result()
            self._tensor_list = self._result = None
        return self._tensors

    def __del__(self):
        # Never waits here (the peers decide when the operation ends): an
        # abandoned request that is still running keeps its memory until it
        # is done, and is freed by a later request or by finalize.
        if getattr(self, "_handle", None):
            try:
                with _abandoned_lock:
                    _abandoned.append((self._handle, self._tensor_list))
                _free_finished_abandoned()
            except (TypeError, AttributeError):
                pass  # the interpreter is shutting down (module globals are gone): kept


# (handle, memory) of requests dropped unfinished; see Request.__del__.
# Threads share it: the ranks of ddp.init_local each run on a thread.
_abandoned = []
_abandoned_lock = threading.Lock()


def _free_finished_abandoned():
    """Frees the abandoned requests that are done (every request of a finalized
    communicator is: ddp_finalize waited for them); never blocks."""
    with _abandoned_lock:
        entries = list(_abandoned)
    for entry in entries:
        finished = ctypes.c_int32(0)
        try:
            _ffi.ddp_request_test(entry[0], finished)
        except _ffi.DDPError:
            finished.value = 1  # done, with an error nobody asked for
        if not finished.value:
            continue
        with _abandoned_lock:
            if entry not in _abandoned:
                continue  # another thread freed it meanwhile
            _abandoned.remove(entry)
        try:
            _ffi.ddp_request_free(entry[0])  # done: returns at once
        except _ffi.DDPError:
            pass  # the caller never asked for the result


class ReplicaCheck:
    """check_replicas' answer: truthy when identical; message says what differs."""

    def __init__(self, identical, message):
        self.identical = identical
        self.message = message

    def __bool__(self):
        return self.identical

    def __repr__(self):
        return f"ReplicaCheck(identical={self.identical}, message={self.message!r})"
