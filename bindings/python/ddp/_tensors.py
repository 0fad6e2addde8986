"""Turns the caller's arrays into a ddp_tensor array without copying them.

Accepted, in this order: NumPy arrays, objects with __dlpack__ (PyTorch, JAX,
CuPy, NumPy), objects with __cuda_array_interface__, and buffer-protocol
objects (memoryview, bytearray, array.array). An array that is not contiguous,
or read-only where the call writes into it, raises ValueError: libddp works in
place, and a hidden copy would leave the caller's array unchanged.

GPU arrays are exported on the stream the call runs on: __dlpack__(stream=...)
makes the producer order its pending work before that stream, as the DLPack
protocol has it; a __cuda_array_interface__ whose stream differs from the
call's is refused (synchronizing them would need CUDA here).
"""
import ctypes

import numpy as np

from . import _ffi

DTYPE_OF_NUMPY_NAME = {"int8": _ffi.DDP_DTYPE_I8, "int32": _ffi.DDP_DTYPE_I32,
                       "int64": _ffi.DDP_DTYPE_I64, "uint8": _ffi.DDP_DTYPE_U8,
                       "float16": _ffi.DDP_DTYPE_F16, "float32": _ffi.DDP_DTYPE_F32,
                       "float64": _ffi.DDP_DTYPE_F64, "bfloat16": _ffi.DDP_DTYPE_BF16}
DTYPE_VALUES = {int(dtype) for dtype in _ffi.ddp_dtype}
NUMPY_NAME_OF_DTYPE = {dtype: name for name, dtype in DTYPE_OF_NUMPY_NAME.items()}
DLPACK_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
DLPACK_CPU = 1  # kDLCPU
DLPACK_CUDA = 2  # kDLCUDA
DLPACK_LEGACY_DEFAULT_STREAM = 1  # what DLPack calls CUDA's legacy default stream


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer.restype = ctypes.c_void_p
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid.restype = ctypes.c_int


class TensorList:
    """A ctypes array of ddp_tensor plus the objects that keep its memory alive
    (the arrays and DLPack capsules) for as long as libddp may touch it."""

    def __init__(self, tensors, writes, what="tensor", stream=None, device=-1, names=None):
        """stream: the cudaStream_t the call runs on (an int; None is the legacy
        default stream). device: the communicator's GPU, the device of
        __cuda_array_interface__ arrays (which do not name theirs). names: a
        function from an item's index to its name in messages (a tree path),
        called only when there is something to say; default "tensor 3"."""
        items = list(tensors)
        self.stream = stream or 0
        self.device = device
        self.keep_alive = list(items)
        self.array = (_ffi.ddp_tensor * len(items))()
        for index, item in enumerate(items):
            self.array[index] = self._describe(item, writes, ItemName(names, what, index))

    def __len__(self):
        return len(self.array)

    def _describe(self, item, writes, where):
        if isinstance(item, np.ndarray):
            return from_numpy(item, writes, where)
        if hasattr(item, "__dlpack__"):
            return self._from_dlpack(item, writes, where)
        if hasattr(item, "__cuda_array_interface__"):
            return from_cuda_array_interface(item.__cuda_array_interface__, writes, where,
                                             self.stream, self.device)
        try:
            view = memoryview(item)
        except TypeError:
            raise TypeError(f"{where}: expected an array (NumPy, __dlpack__, "
                            f"__cuda_array_interface__ or a buffer) or a number, got "
                            f"{type(item).__name__}") from None
        array = np.asarray(view)  # a view of the same memory, read-only if the buffer is
        self.keep_alive.append(array)
        return from_numpy(array, writes, where)

    def _from_dlpack(self, item, writes, where):
        """CPU tensors through np.from_dlpack (a view, read-only if the producer
        says so), which measured about twice as fast as reading the capsule
        here (bench/python_call_overhead_bench.py); the capsule itself only for
        what NumPy cannot view: device memory, and dtypes such as bfloat16."""
        if _dlpack_device_type(item) == DLPACK_CPU:
            try:
                array = np.from_dlpack(item)
            except (BufferError, TypeError, ValueError, RuntimeError):
                pass  # a dtype NumPy has no DLPack mapping for: read the capsule
            else:
                self.keep_alive.append(array)
                return from_numpy(array, writes, where)
        return self._from_dlpack_capsule(item, writes, where)

    def _from_dlpack_capsule(self, item, writes, where):
        # On the GPU the producer orders its pending work before our stream.
        on_gpu = _dlpack_device_type(item) == DLPACK_CUDA
        stream = {"stream": dlpack_stream(self.stream)} if on_gpu else {}
        try:
            capsule = item.__dlpack__(max_version=(1, 0), **stream)
        except TypeError:  # a producer older than DLPack 1.0 takes no max_version
            capsule = item.__dlpack__(**stream)
        except BufferError as error:
            raise ValueError(f"{where}: its __dlpack__ refused to export it ({error})") from None
        self.keep_alive.append(capsule)  # its destructor frees the tensor after we are done
        if _capsule_is_valid(capsule, b"dltensor_versioned"):
            managed = _DLManagedTensorVersioned.from_address(
                _capsule_pointer(capsule, b"dltensor_versioned"))
            read_only = bool(managed.flags & DLPACK_READ_ONLY)
        elif _capsule_is_valid(capsule, b"dltensor"):
            managed = _DLManagedTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
            read_only = False  # unversioned DLPack cannot say; the producer exported it
        else:
            raise ValueError(f"{where}: __dlpack__ returned something that is not a DLPack "
                             "capsule (or one already consumed)")
        return from_dltensor(managed.dl_tensor, read_only and writes, where)


class ItemName:
    """An item's name in a message, worked out only when a message is made."""

    def __init__(self, names, what, index):
        self.names, self.what, self.index = names, what, index

    def __str__(self):
        return self.names(self.index) if self.names else f"{self.what} {self.index}"

    def __format__(self, spec):
        return format(str(self), spec)


def _dlpack_device_type(item):
    try:
        return item.__dlpack_device__()[0]
    except (AttributeError, TypeError, ValueError):
        return None  # the capsule will say


def dlpack_stream(stream):
    """The stream as DLPack's __dlpack__(stream=) names it: 1 for CUDA's legacy
    default stream (libddp's NULL), else the cudaStream_t itself (2 is the
    per-thread default stream in both)."""
    return DLPACK_LEGACY_DEFAULT_STREAM if stream == 0 else stream


def numpy_dtype(dtype, where):
    """The NumPy dtype of a ddp_dtype, for arrays made to hold a call's results
    (bfloat16 is ml_dtypes', the one JAX and this module's from_numpy use)."""
    name = NUMPY_NAME_OF_DTYPE[dtype]
    if name != "bfloat16":
        return np.dtype(name)
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError(f"{where}: NumPy has no bfloat16 without the ml_dtypes package; "
                        "install it, or pass out=") from None
    return np.dtype(ml_dtypes.bfloat16)


def from_numpy(array, writes, where):
    dtype = DTYPE_OF_NUMPY_NAME.get(array.dtype.name)
    if dtype is None:
        raise ValueError(f"{where}: dtype {array.dtype} is not one libddp reduces "
                         f"(one of {', '.join(DTYPE_OF_NUMPY_NAME)})")
    if not array.dtype.isnative:
        raise ValueError(f"{where}: dtype {array.dtype} is not in native byte order")
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise ValueError(f"{where}: the array is not contiguous (strides {array.strides}); "
                         "libddp works in place, so pass np.ascontiguousarray(a) and use "
                         "that array")
    if writes and not array.flags.writeable:
        raise ValueError(f"{where}: the array is read-only, and this call writes into it")
    return _ffi.ddp_tensor(array.ctypes.data, array.size, dtype, _ffi.DDP_DEVICE_CPU, 0)


def from_dltensor(tensor, read_only_and_writes, where):
    shape = [tensor.shape[i] for i in range(tensor.ndim)]
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if tensor.strides and count > 0:
        expected = 1
        for axis in reversed(range(tensor.ndim)):
            if shape[axis] != 1 and tensor.strides[axis] != expected:
                raise ValueError(f"{where}: the tensor is not contiguous (shape {shape}, strides "
                                 f"{[tensor.strides[i] for i in range(tensor.ndim)]}); "
                                 "libddp works in place, so pass a contiguous tensor")
            expected *= shape[axis]
    if tensor.dtype.lanes != 1:
        raise ValueError(f"{where}: vector dtypes (lanes={tensor.dtype.lanes}) are not supported")
    dtype = (tensor.dtype.code << 8) | tensor.dtype.bits
    if dtype not in DTYPE_VALUES:
        raise ValueError(f"{where}: DLPack dtype code {tensor.dtype.code} with "
                         f"{tensor.dtype.bits} bits is not one libddp reduces")
    if read_only_and_writes:
        raise ValueError(f"{where}: the tensor is read-only, and this call writes into it")
    return _ffi.ddp_tensor((tensor.data or 0) + tensor.byte_offset, count, dtype,
                           tensor.device.device_type, tensor.device.device_id)


def from_cuda_array_interface(interface, writes, where, stream=0, device=-1):
    typestr = interface["typestr"]
    dtype = DTYPE_OF_NUMPY_NAME.get(np.dtype(typestr).name)
    if dtype is None:
        raise ValueError(f"{where}: dtype {typestr} is not one libddp reduces")
    shape = interface["shape"]
    itemsize = np.dtype(typestr).itemsize
    strides = interface.get("strides")
    if strides is not None and strides != tuple(
            itemsize * int(np.prod(shape[axis + 1:], dtype=np.int64))
            for axis in range(len(shape))):
        raise ValueError(f"{where}: the CUDA array is not contiguous (strides {strides})")
    pointer, read_only = interface["data"]
    if writes and read_only:
        raise ValueError(f"{where}: the CUDA array is read-only, and this call writes into it")
    # Version 3: the stream the producer's pending work is on (None: none pending).
    producer_stream = interface.get("stream")
    if producer_stream is not None and producer_stream != dlpack_stream(stream):
        raise ValueError(f"{where}: its __cuda_array_interface__ has work pending on stream "
                         f"{producer_stream}, but this call runs on stream {dlpack_stream(stream)}; "
                         "pass stream= that stream (or synchronize the array first)")
    # The interface does not name the device: it is the communicator's GPU
    # (libddp refuses the list, saying why, on a rank without one).
    return _ffi.ddp_tensor(pointer, int(np.prod(shape, dtype=np.int64)), dtype,
                           _ffi.DDP_DEVICE_CUDA, max(device, 0))
