"""ddp.init() and the Communicator: the collectives on lists of arrays."""
import ctypes

from . import _ffi, _log_bridge, _state_tree
from ._tensors import TensorList

OP_OF_NAME = {"sum": _ffi.DDP_OP_SUM, "avg": _ffi.DDP_OP_AVG, "mean": _ffi.DDP_OP_AVG,
              "min": _ffi.DDP_OP_MIN, "max": _ffi.DDP_OP_MAX, "prod": _ffi.DDP_OP_PROD}
BACKEND_OF_NAME = {"auto": _ffi.DDP_BACKEND_AUTO, "self": _ffi.DDP_BACKEND_SELF,
                   "mpi": _ffi.DDP_BACKEND_MPI, "nccl": _ffi.DDP_BACKEND_NCCL}

_world = None


def current_world():
    """The communicator ddp.init() returned, while it is not finalized."""
    if _world is None or _world.finalized:
        raise RuntimeError("no ddp communicator: call ddp.init() first")
    return _world


def _op(op):
    if isinstance(op, str) and op.lower() in OP_OF_NAME:
        return OP_OF_NAME[op.lower()]
    if isinstance(op, _ffi.ddp_op):
        return op
    raise ValueError(f"op {op!r}: expected one of {', '.join(OP_OF_NAME)}")


def _as_list(tensors):
    """A list of arrays from a list/tuple of them or from one array."""
    return list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]


def _collective_options(fusion_bytes=None):
    options = _ffi.ddp_collective_options()
    _ffi.ddp_collective_options_init(options, ctypes.sizeof(options))
    if fusion_bytes is not None:
        options.fusion_bytes = fusion_bytes
    return options


def init(comm=None, backend="auto", timeout=None, log_to_python=True):
    """Starts libddp and returns the world Communicator (also a context manager
    that finalizes it).

    comm: an mpi4py communicator to adopt (libddp duplicates it; MPI stays
    initialized after finalize). backend: "auto", "self", "mpi" or "nccl".
    timeout: seconds a collective waits for every rank (default: DDP_TIMEOUT_S,
    else 1800). log_to_python: route libddp's log lines to logging("ddp")."""
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
        if not timeout > 0:
            raise ValueError(f"timeout {timeout!r}: must be a positive number of seconds")
        options.timeout_s = timeout
    if log_to_python:
        _log_bridge.route_to_logging()
    handle = ctypes.POINTER(_ffi.ddp_comm)()
    _ffi.ddp_init(options, handle)
    _world = Communicator(handle)
    return _world


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

    def __exit__(self, *exc):
        self.finalize()

    def finalize(self):
        """Ends the communicator (idempotent); MPI ends too if libddp started it."""
        _ffi.ddp_finalize(self._handle)
        self.finalized = True

    def allreduce(self, tensors, op="avg", fusion_bytes=None):
        """Reduces each array in place across ranks; returns tensors.
        op: "sum", "avg" (floating types), "min", "max", "prod"."""
        tensor_list = TensorList(_as_list(tensors), writes=True)
        _ffi.ddp_allreduce_tensor_list(self._handle, tensor_list.array, len(tensor_list),
                                       _op(op), _collective_options(fusion_bytes))
        return tensors

    def allreduce_async(self, tensors, op="avg", fusion_bytes=None):
        """Starts allreduce in the background; returns a Request. Leave the arrays
        alone until request.wait() returns."""
        tensor_list = TensorList(_as_list(tensors), writes=True)
        request = ctypes.POINTER(_ffi.ddp_request)()
        _ffi.ddp_allreduce_tensor_list_async(self._handle, tensor_list.array, len(tensor_list),
                                             _op(op), _collective_options(fusion_bytes), request)
        return Request(request, tensors, tensor_list)

    def broadcast(self, tensors, root=0):
        """Overwrites each array with root's; returns tensors."""
        tensor_list = TensorList(_as_list(tensors), writes=True)
        _ffi.ddp_broadcast_tensor_list(self._handle, tensor_list.array, len(tensor_list), root,
                                       None)
        return tensors

    def reduce(self, tensors, op="sum", root=0):
        """Reduces into root's arrays; other ranks' arrays are left as they were."""
        tensor_list = TensorList(_as_list(tensors), writes=True)
        _ffi.ddp_reduce_tensor_list(self._handle, tensor_list.array, len(tensor_list), _op(op),
                                    root, None)
        return tensors

    def sync_optimizer_state(self, state, root=0):
        """Makes state equal root's and returns it: arrays are overwritten in place,
        numbers (step counts, learning rates) come back in the returned structure.
        Raises MismatchError on every rank if the structures differ."""
        leaves, scalars = [], []
        _state_tree.flatten(state, leaves, scalars)
        tensor_list = TensorList([array for _, array in leaves], writes=True, what="leaf")
        values = (ctypes.c_double * len(scalars))(*[float(value) for _, value in scalars])
        _ffi.ddp_sync_optimizer_state(self._handle, tensor_list.array, len(tensor_list), values,
                                      len(scalars), root, None)
        return _state_tree.rebuild(state, iter(values))

    def check_replicas(self, tensors):
        """Whether every rank holds bitwise the same arrays; the result is falsy when
        not, and its message names the first differing tensor and two ranks."""
        tensor_list = TensorList(_as_list(tensors), writes=False)
        identical = ctypes.c_int32()
        _ffi.ddp_check_replicas(self._handle, tensor_list.array, len(tensor_list), None,
                                identical)
        message = "" if identical.value else _ffi.ddp_last_error_message().decode()
        return ReplicaCheck(bool(identical.value), message)

    def barrier(self):
        _ffi.ddp_barrier(self._handle, None)

    def log(self, message, level="info"):
        """Logs one rank-prefixed line (to logging("ddp") after init's routing)."""
        _ffi.ddp_log(self._handle, _log_bridge.ddp_level(level), str(message).encode())


class Request:
    """An allreduce in flight. wait() returns its tensors or raises its error."""

    def __init__(self, handle, tensors, tensor_list):
        self._handle = handle
        self._tensors = tensors
        self._tensor_list = tensor_list  # keeps the memory alive until freed

    def done(self):
        """True once complete (raises the operation's error, if any); never blocks."""
        if not self._handle:
            return True
        finished = ctypes.c_int32()
        _ffi.ddp_request_test(self._handle, finished)
        return bool(finished.value)

    def wait(self):
        """Blocks until complete; returns the tensors or raises the error."""
        if self._handle:
            handle, self._handle = self._handle, None
            _ffi.ddp_request_free(handle)  # waits, then frees; raises on failure
            self._tensor_list = None
        return self._tensors

    def __del__(self):
        # An abandoned request still owns memory the operation writes into:
        # wait for it rather than free memory libddp is using.
        if getattr(self, "_handle", None):
            try:
                _ffi.ddp_request_free(self._handle)
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
