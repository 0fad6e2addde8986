"""The part of XLA's FFI C ABI (jaxlib's xla/ffi/api/c_api.h, API 0.x) that
a handler of buffers and attributes needs, declared for ctypes: the call
frame XLA passes, its buffers and scalar or string attributes, the metadata
query XLA makes when a handler is registered, and an error to return.

`handler(function)` turns `function(inputs, outputs, attributes)` (NumPy
views of the call's buffers, and a dict of its attributes) into a C function
pointer for jax.ffi.register_ffi_target. An exception from `function`
becomes an XLA error carrying its message, so it is raised by JAX where the
result is used; nothing unwinds through XLA.
"""
import ctypes

import ml_dtypes
import numpy as np

API_MAJOR, API_MINOR = 0, 1  # what these declarations follow; XLA accepts older minors
EXTENSION_METADATA = 1
STAGE_EXECUTE = 3
ATTRIBUTE_SCALAR, ATTRIBUTE_STRING = 3, 4
ERROR_UNKNOWN, ERROR_INVALID_ARGUMENT, ERROR_DEADLINE_EXCEEDED, ERROR_FAILED_PRECONDITION = \
    2, 3, 4, 9

# XLA_FFI_DataType codes to NumPy dtypes (ml_dtypes for bfloat16, as JAX).
NUMPY_OF_DTYPE = {1: np.dtype(np.bool_), 2: np.dtype(np.int8), 3: np.dtype(np.int16),
                  4: np.dtype(np.int32), 5: np.dtype(np.int64), 6: np.dtype(np.uint8),
                  7: np.dtype(np.uint16), 8: np.dtype(np.uint32), 9: np.dtype(np.uint64),
                  10: np.dtype(np.float16), 11: np.dtype(np.float32), 12: np.dtype(np.float64),
                  15: np.dtype(np.complex64), 16: np.dtype(ml_dtypes.bfloat16),
                  18: np.dtype(np.complex128)}


class ExtensionBase(ctypes.Structure):
    pass


ExtensionBase._fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int),
                          ("next", ctypes.POINTER(ExtensionBase))]


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("dtype", ctypes.c_int), ("data", ctypes.c_void_p), ("rank", ctypes.c_int64),
                ("dims", ctypes.POINTER(ctypes.c_int64))]


class ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class Scalar(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("value", ctypes.c_void_p)]


class BufferList(ctypes.Structure):
    """XLA_FFI_Args and XLA_FFI_Rets (the same layout)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("size", ctypes.c_int64), ("types", ctypes.POINTER(ctypes.c_int)),
                ("items", ctypes.POINTER(ctypes.c_void_p))]


class Attributes(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("size", ctypes.c_int64), ("types", ctypes.POINTER(ctypes.c_int)),
                ("names", ctypes.POINTER(ctypes.POINTER(ByteSpan))),
                ("attrs", ctypes.POINTER(ctypes.c_void_p))]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ErrorCreateArgs))


class Api(ctypes.Structure):
    """The head of XLA_FFI_Api, up to the function that makes an error."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("api_version", ApiVersion), ("internal_api", ctypes.c_void_p),
                ("error_create", ERROR_CREATE)]


class CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("extension_start", ctypes.POINTER(ExtensionBase)),
                ("api", ctypes.POINTER(Api)), ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int),
                ("args", BufferList), ("rets", BufferList), ("attrs", Attributes)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", ApiVersion),
                ("traits", ctypes.c_uint32)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", ExtensionBase), ("metadata", ctypes.POINTER(Metadata))]


HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(CallFrame))


def handler(function, error_code_of):
    """The C handler for `function` (see the module doc); error_code_of maps
    an exception to an XLA error code. Keep the returned object alive as
    long as XLA may call it."""

    def call(frame_pointer):
        frame = frame_pointer.contents
        try:
            if frame.extension_start and frame.extension_start.contents.type == EXTENSION_METADATA:
                _describe(frame)
            elif frame.stage == STAGE_EXECUTE:
                function(_buffers(frame.args), _buffers(frame.rets), _attributes(frame.attrs))
            return None
        except BaseException as error:  # noqa: BLE001 (returned to XLA; nothing may unwind)
            return _error(frame, f"{type(error).__name__}: {error}", error_code_of(error))

    return HANDLER(call)


def _describe(frame):
    """XLA's question at registration: which API version, which traits."""
    extension = ctypes.cast(frame.extension_start, ctypes.POINTER(MetadataExtension)).contents
    metadata = extension.metadata.contents
    metadata.api_version.major_version = API_MAJOR
    metadata.api_version.minor_version = API_MINOR
    metadata.traits = 0


class BufferWithoutView:
    """A buffer of a dtype NumPy cannot view here (float8, int4): passed on as
    it is, so that the collective refuses it in its place on every rank."""

    def __init__(self, code):
        self.code = code

    def __repr__(self):
        return f"an XLA buffer of dtype code {self.code}"


def _buffers(buffer_list):
    views = []
    for index in range(buffer_list.size):
        buffer = ctypes.cast(buffer_list.items[index], ctypes.POINTER(Buffer)).contents
        dtype = NUMPY_OF_DTYPE.get(buffer.dtype)
        if dtype is None:
            views.append(BufferWithoutView(buffer.dtype))
            continue
        shape = tuple(buffer.dims[axis] for axis in range(buffer.rank))
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0 or not buffer.data:
            views.append(np.zeros(shape, dtype))
            continue
        memory = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(buffer.data)
        views.append(np.frombuffer(memory, dtype=dtype).reshape(shape))
    return views


def _attributes(attributes):
    """The call's scalar and string attributes by name."""
    found = {}
    for index in range(attributes.size):
        span = attributes.names[index].contents
        name = ctypes.string_at(span.ptr, span.len).decode()
        kind = attributes.types[index]
        if kind == ATTRIBUTE_STRING:
            text = ctypes.cast(attributes.attrs[index], ctypes.POINTER(ByteSpan)).contents
            found[name] = ctypes.string_at(text.ptr, text.len).decode()
        elif kind == ATTRIBUTE_SCALAR:
            scalar = ctypes.cast(attributes.attrs[index], ctypes.POINTER(Scalar)).contents
            dtype = NUMPY_OF_DTYPE[scalar.dtype]
            found[name] = np.frombuffer(ctypes.string_at(scalar.value, dtype.itemsize),
                                        dtype=dtype)[0].item()
    return found


def _error(frame, message, code):
    arguments = ErrorCreateArgs(ctypes.sizeof(ErrorCreateArgs), None,
                                message.encode("utf-8", "replace"), code)
    return frame.api.contents.error_create(ctypes.byref(arguments))
