"""Persistent gradient buckets (libddp's experimental ddp_reducer_*), as
PyTorch DDP's reducer: the gradient list is registered once, libddp owns the
buckets, and the gradients are NumPy views into them.

    reducer = comm.reducer(params, op="avg")   # shapes and dtypes of params
    for step ...:
        for i in reversed(range(len(params))):             # backward: last layer first
            np.matmul(a, b, out=reducer.gradients[i])      # write straight into the bucket
            reducer.mark_ready(i)                          # its bucket may start now
        reducer.wait()                                     # every gradient averaged

A bucket's reduction starts the moment its last gradient is marked, while the
caller goes on computing; nothing is packed or copied.
"""
import ctypes

import numpy as np

from . import _ffi

try:
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # bfloat16 gradients then cannot be viewed
    _bfloat16 = None

_NUMPY_OF_DTYPE = {_ffi.DDP_DTYPE_I8: np.int8, _ffi.DDP_DTYPE_I32: np.int32, _ffi.DDP_DTYPE_I64: np.int64,
                   _ffi.DDP_DTYPE_U8: np.uint8, _ffi.DDP_DTYPE_F16: np.float16,
                   _ffi.DDP_DTYPE_F32: np.float32, _ffi.DDP_DTYPE_F64: np.float64,
                   _ffi.DDP_DTYPE_BF16: _bfloat16}
_DTYPE_OF_NUMPY = {np.dtype(numpy_type).name: dtype
                   for dtype, numpy_type in _NUMPY_OF_DTYPE.items() if numpy_type is not None}


class Reducer:
    """Gradient buckets for a fixed list of parameter shapes; see the module doc.
    Close it (or use `with`) before finalizing the communicator; closing
    invalidates the gradient views."""

    def __init__(self, comm, like, op, fusion_bytes, options):
        arrays = [np.asarray(array) for array in like]
        layout = (_ffi.ddp_tensor * len(arrays))()
        for index, array in enumerate(arrays):
            dtype = _DTYPE_OF_NUMPY.get(array.dtype.name)
            if dtype is None:
                raise ValueError(f"gradient {index}: dtype {array.dtype} is not one libddp reduces")
            layout[index].count = array.size
            layout[index].dtype = int(dtype)
            layout[index].device_type = _ffi.DDP_DEVICE_CPU
        self._handle = ctypes.POINTER(_ffi.ddp_reducer)()
        _ffi.ddp_reducer_create(comm._handle, layout, len(arrays), op, options, self._handle)
        self.gradients = [self._view(index, array.shape) for index, array in enumerate(arrays)]

    def _view(self, index, shape):
        tensor = _ffi.ddp_tensor()
        _ffi.ddp_reducer_gradient(self._handle, index, tensor)
        numpy_type = _NUMPY_OF_DTYPE[tensor.dtype]
        if not tensor.data:
            return np.zeros(shape, numpy_type)
        nbytes = tensor.count * np.dtype(numpy_type).itemsize
        memory = (ctypes.c_uint8 * nbytes).from_address(tensor.data)
        memory._reducer = self  # the bucket outlives no view, unless closed explicitly
        return np.frombuffer(memory, dtype=numpy_type).reshape(shape)

    def mark_ready(self, index):
        """Gradient `index` is computed for this step (any order)."""
        _ffi.ddp_reducer_mark_ready(self._handle, index)

    def wait(self):
        """Finishes the step on every rank; raises MismatchError on every rank
        if ranks marked different gradients."""
        _ffi.ddp_reducer_wait(self._handle)

    def close(self):
        if self._handle:
            _ffi.ddp_reducer_free(self._handle)
            self._handle = ctypes.POINTER(_ffi.ddp_reducer)()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
