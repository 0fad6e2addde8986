"""Persistent gradient buckets (libddp's experimental ddp_reducer_*), as
PyTorch DDP's reducer: the gradients are registered once (a list, a dict or
any tree of arrays, as every other call takes), libddp owns the buckets, and
the gradients are views into them, in a tree of the same structure: NumPy
arrays, or torch tensors where `like` holds torch tensors (CPU: the buckets
live in host memory).

    reducer = comm.reducer(params, op="avg")   # shapes and dtypes of params
    for step ...:
        for name in reversed(layer_names):                      # backward: last layer first
            np.matmul(a, b, out=reducer.gradients[name])        # write straight into the bucket
            reducer.mark_ready(reducer.gradients[name])         # its bucket may start now
        reducer.wait()                                          # every gradient averaged

A bucket's reduction starts the moment its last gradient is marked, while the
caller goes on computing; nothing is packed or copied.

A bad argument to mark_ready ends the step on every rank at once (see
mark_ready), so that no peer waits for this rank.

Lifetime: the views keep their buckets alive. close() (or leaving `with`)
finishes a step left open (collective, as wait) and ends the reducer, but
the buckets are freed only when the last view is gone, so a view read after
close() holds the last reduced values instead of freed memory. Nothing here
waits for peers from a destructor: a reducer dropped with a step still open
keeps its buckets (libddp cannot finish the step without the peers).
"""
import ctypes

import numpy as np

from . import _ffi, _group, _leaf_names, _trees
from ._agreement import CheckedCall, collective_options
from ._ops import op_value

try:
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # bfloat16 gradients then cannot be viewed
    _bfloat16 = None

_NUMPY_OF_DTYPE = {_ffi.DDP_DTYPE_I8: np.int8, _ffi.DDP_DTYPE_I32: np.int32, _ffi.DDP_DTYPE_I64: np.int64,
                   _ffi.DDP_DTYPE_U8: np.uint8, _ffi.DDP_DTYPE_F16: np.float16,
                   _ffi.DDP_DTYPE_F32: np.float32, _ffi.DDP_DTYPE_F64: np.float64,
                   _ffi.DDP_DTYPE_BF16: _bfloat16}
# A dtype's name (NumPy's, JAX's, or torch's without "torch.") to ddp_dtype.
_DTYPE_OF_NAME = {"int8": _ffi.DDP_DTYPE_I8, "int32": _ffi.DDP_DTYPE_I32,
                  "int64": _ffi.DDP_DTYPE_I64, "uint8": _ffi.DDP_DTYPE_U8,
                  "float16": _ffi.DDP_DTYPE_F16, "bfloat16": _ffi.DDP_DTYPE_BF16,
                  "float32": _ffi.DDP_DTYPE_F32, "float64": _ffi.DDP_DTYPE_F64}


class _Buckets:
    """One ddp_reducer and its buckets. Every gradient view refers to it, so
    it lives as long as the reducer or any view; freed then without waiting
    for peers (no step is open, or it is kept: see the module doc)."""

    def __init__(self):
        self.handle = ctypes.POINTER(_ffi.ddp_reducer)()
        self.step_open = False  # a gradient was marked since the last wait

    def __del__(self):
        if self.handle and not self.step_open:
            try:
                _ffi.ddp_reducer_free(self.handle)  # no step open: frees, waits for nothing
            except Exception:  # noqa: BLE001 (refused while another thread is inside libddp: kept)
                pass


class Reducer:
    """Gradient buckets for a fixed tree of parameter shapes; see the module
    doc. `gradients` is a tree like the one registered, of NumPy views into
    the buckets."""

    def __init__(self, comm, like, op="avg", fusion_bytes=None, timeout=None):
        self._buckets = None
        _group.refuse_inside("a reducer", "each rank's steps need a thread of their own")
        with CheckedCall(comm, "reducer_create", like, "like", timeout) as call:
            like = call.tree  # read here: see CheckedCall.tree
            leaves, rebuild = _trees.flatten(like)
            shapes_and_types = [_shape_and_dtype(leaf, call.leaf_name(index))
                                for index, leaf in enumerate(leaves)]
            as_torch = [_is_torch(leaf) for leaf in leaves]
            layout = (_ffi.ddp_tensor * len(leaves))()
            for index, (shape, dtype) in enumerate(shapes_and_types):
                layout[index].count = int(np.prod(shape, dtype=np.int64))
                layout[index].dtype = int(dtype)
                layout[index].device_type = _ffi.DDP_DEVICE_CPU
            reduce_op = op_value(op)
            options = collective_options(fusion_bytes, 0, timeout, _leaf_names.of(like, leaves))
        buckets = _Buckets()
        call.run(_ffi.ddp_reducer_create, comm._handle, layout, len(leaves), reduce_op, options,
                 buckets.handle)
        self._buckets = buckets
        call.check_structure()  # paths and shapes, which libddp does not see
        self._views = [_view(buckets, index, shape, torch_view)
                       for index, ((shape, _), torch_view) in enumerate(zip(shapes_and_types,
                                                                             as_torch))]
        self._index_of_view = {id(view): index for index, view in enumerate(self._views)}
        self.gradients = rebuild(self._views)

    def _live(self):
        if self._buckets is None:
            raise RuntimeError("the reducer is closed (its gradient views stay readable)")
        return self._buckets

    def _index(self, gradient):
        """The flat index of `gradient`: an int, or one of the gradient views."""
        if isinstance(gradient, (int, np.integer)) and not isinstance(gradient, bool):
            if not 0 <= gradient < len(self._views):
                raise IndexError(f"gradient index {gradient} is out of range: the reducer has "
                                 f"{len(self._views)} gradients")
            return int(gradient)
        index = self._index_of_view.get(id(gradient))
        if index is None or self._views[index] is not gradient:
            raise TypeError("mark_ready takes a gradient's index or one of reducer.gradients' "
                            f"arrays itself, not a {type(gradient).__name__} of its own")
        return index

    def mark_ready(self, gradient):
        """`gradient` (its index in flat order, or the view from
        reducer.gradients) is computed for this step (any order). A bad
        argument (or one marked twice) ends the step on every rank: this rank
        takes part as failed (ddp_reducer_fail_step, which returns once the
        peers reach their wait) and raises the error; the peers' wait()
        raises MismatchError naming this rank and the reason. The next
        mark_ready starts a new step."""
        buckets = self._live()
        try:
            index = self._index(gradient)
            _ffi.ddp_reducer_mark_ready(buckets.handle, index)
        except (IndexError, TypeError, _ffi.InvalidArgumentError) as error:
            self._fail_step(buckets, f"{type(error).__name__}: {error}")
            raise
        buckets.step_open = True

    def fail_step(self, reason):
        """Ends this rank's step as failed (collective, as wait): every peer's
        wait() raises MismatchError naming this rank and `reason`. For a
        caller that found a problem of its own during the step; it raises
        its own error after this returns."""
        self._fail_step(self._live(), reason)

    def _fail_step(self, buckets, reason):
        try:
            _ffi.ddp_reducer_fail_step(buckets.handle, reason.encode("utf-8", "replace"))
        except _ffi.DDPError:
            pass  # refused or broken: the argument error is the one to report
        buckets.step_open = False

    def wait(self):
        """Finishes the step on every rank; raises MismatchError on every rank
        if ranks marked different gradients."""
        buckets = self._live()
        try:
            _ffi.ddp_reducer_wait(buckets.handle)
        finally:
            buckets.step_open = False  # libddp ends the step, failed or not

    def close(self):
        """Finishes a step left open (collective, as wait) and ends the
        reducer; later calls raise RuntimeError. Views stay readable."""
        if self._buckets is None:
            return
        buckets, self._buckets = self._buckets, None
        if buckets.step_open:
            try:
                _ffi.ddp_reducer_wait(buckets.handle)
            finally:
                buckets.step_open = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        try:
            self.close()
        except _ffi.DDPError:
            if exc_type is None:
                raise  # else the exception that left the block is the one to see


def _is_torch(leaf):
    return type(leaf).__module__.split(".")[0] == "torch"


def _shape_and_dtype(leaf, name):
    """A gradient's shape and ddp_dtype, from an array (NumPy, JAX, torch,
    anything with a shape and a dtype) shaped like it."""
    dtype = getattr(leaf, "dtype", None)
    shape = getattr(leaf, "shape", None)
    if dtype is None or shape is None:
        raise TypeError(f"{name}: expected an array to shape a gradient like, got "
                        f"{type(leaf).__name__}")
    if _is_torch(leaf) and leaf.device.type != "cpu":
        raise ValueError(f"{name}: a {leaf.device.type} tensor; the reducer's buckets live in "
                         "host memory in this version (reduce device gradients with "
                         "allreduce_gradients)")
    ddp_dtype = _DTYPE_OF_NAME.get(_dtype_name(dtype))
    if ddp_dtype is None:
        raise ValueError(f"{name}: dtype {dtype} is not one libddp reduces "
                         f"(one of {', '.join(_DTYPE_OF_NAME)})")
    if ddp_dtype == _ffi.DDP_DTYPE_BF16 and _bfloat16 is None and not _is_torch(leaf):
        raise ValueError(f"{name}: a bfloat16 gradient is viewed in NumPy through ml_dtypes, "
                         "which is not installed (pip install ml_dtypes)")
    return tuple(int(extent) for extent in shape), ddp_dtype


def _dtype_name(dtype):
    """"float32" for np.float32, jnp.float32, torch.float32 or "float32"."""
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    try:
        return np.dtype(dtype).name
    except TypeError:
        return text


def _view(buckets, index, shape, as_torch):
    """Gradient `index`'s storage as a NumPy array (or a torch tensor) of
    `shape`; its memory object refers to the buckets, so they outlive the
    view."""
    tensor = _ffi.ddp_tensor()
    _ffi.ddp_reducer_gradient(buckets.handle, index, tensor)
    if as_torch:
        return _torch_view(tensor, buckets, shape)
    return _numpy_view(tensor, buckets, _NUMPY_OF_DTYPE[tensor.dtype]).reshape(shape)


def _numpy_view(tensor, buckets, numpy_type):
    nbytes = tensor.count * np.dtype(numpy_type).itemsize
    if not tensor.data:
        return np.zeros(tensor.count, numpy_type)
    memory = (ctypes.c_uint8 * nbytes).from_address(tensor.data)
    memory._buckets = buckets
    return np.frombuffer(memory, dtype=numpy_type)


def _torch_view(tensor, buckets, shape):
    """A CPU torch tensor over the gradient's storage (torch reads bfloat16
    through an int16 array, which NumPy has)."""
    import torch  # loaded: the gradient was shaped like a torch tensor
    if tensor.dtype == _ffi.DDP_DTYPE_BF16:
        flat = torch.from_numpy(_numpy_view(tensor, buckets, np.int16)).view(torch.bfloat16)
    else:
        flat = torch.from_numpy(_numpy_view(tensor, buckets, _NUMPY_OF_DTYPE[tensor.dtype]))
    return flat.view(shape)
