"""Writes bindings/python/ddp/_ffi.py, the ctypes layer, from the header model."""
from __future__ import annotations

from swig_model import CType, Header, generated_notice

CTYPES_OF = {"char": "ctypes.c_char", "int": "ctypes.c_int", "int32_t": "ctypes.c_int32",
             "int64_t": "ctypes.c_int64", "uint32_t": "ctypes.c_uint32",
             "uint64_t": "ctypes.c_uint64", "size_t": "ctypes.c_size_t",
             "double": "ctypes.c_double"}

# Statuses whose exception also derives from the built-in a Python user would catch.
BUILTIN_BASE_OF_STATUS = {"DDP_ERR_INVALID_ARGUMENT": "ValueError",
                          "DDP_ERR_UNSUPPORTED": "NotImplementedError",
                          "DDP_ERR_TIMEOUT": "TimeoutError",
                          "DDP_ERR_OUT_OF_MEMORY": "MemoryError"}

STATUS_ENUM = "ddp_status"


def exception_name(status: str) -> str:
    """DDP_ERR_INVALID_ARGUMENT -> InvalidArgumentError."""
    words = status.removeprefix("DDP_ERR_").split("_")
    return "".join(word.capitalize() for word in words) + "Error"


def ctype(t: CType, header: Header) -> str:
    """The ctypes expression for a C type; C enums are ints."""
    enums = {e.name for e in header.enums}
    if t.base == "void":
        if t.pointers == 0:
            return "None"
        inner, pointers = "ctypes.c_void_p", t.pointers - 1
    elif t.base == "char" and t.pointers >= 1:
        inner, pointers = "ctypes.c_char_p", t.pointers - 1
    elif t.base in enums:
        inner, pointers = "ctypes.c_int", t.pointers
    else:
        inner, pointers = CTYPES_OF.get(t.base, t.base), t.pointers
    for _ in range(pointers):
        inner = f"ctypes.POINTER({inner})"
    return inner


def emit(header: Header) -> str:
    out = [generated_notice(header) + '''"""The raw ctypes layer of libddp: every constant, enum, struct, handle and function
of include/ddp/ddp.h under its C name. A function returning ddp_status raises the
DDPError subclass of that status, carrying ddp_last_error_message(). The Pythonic
API (import ddp) is built on this module."""
import builtins
import ctypes
import enum

from ._library import load_library

_lib = load_library()
''']
    out.append("# Constants")
    out += [f"{c.name} = {c.value}" for c in header.constants]
    for e in header.enums:
        out.append(f"\n\nclass {e.name}(enum.IntEnum):")
        out += [f"    {name} = {value}" for name, value in e.items]
    out.append("")
    for e in header.enums:
        out += [f"{name} = {e.name}.{name}" for name, _ in e.items]
    for o in header.opaques:
        out.append(f'\n\nclass {o.name}(ctypes.Structure):\n    """Opaque handle: only pointers '
                   'to it are used."""')
    for s in header.structs:
        out.append(f"\n\nclass {s.name}(ctypes.Structure):\n    _fields_ = [")
        out += [f'        ("{f.name}", {ctype(f.type, header)}),' for f in s.fields]
        out.append("    ]")
    out.append("")
    for p in header.function_pointers:
        args = ", ".join([ctype(p.result, header)] + [ctype(a.type, header) for a in p.params])
        out.append(f"{p.name} = ctypes.CFUNCTYPE({args})")
    out.append(emit_errors(header))
    for f in header.functions:
        argtypes = ", ".join(ctype(p.type, header) for p in f.params)
        out.append(f"\n{f.name} = _lib.{f.name}")
        out.append(f"{f.name}.argtypes = [{argtypes}]")
        if f.result.base == STATUS_ENUM and f.result.pointers == 0:
            out.append(f"{f.name}.restype = ctypes.c_int")
            out.append(f"{f.name}.errcheck = _check_status")
        else:
            out.append(f"{f.name}.restype = {ctype(f.result, header)}")
    return "\n".join(out) + "\n"


def emit_errors(header: Header) -> str:
    statuses = next(e for e in header.enums if e.name == STATUS_ENUM)
    out = ['''

class DDPError(Exception):
    """A libddp call returned a status other than DDP_OK."""
    __module__ = "ddp"  # tracebacks name the public class, ddp.DDPError

    def __init__(self, status, message):
        self.status = status
        self.status_name = ddp_status_name(status).decode()
        self.message = message
        super().__init__(f"{self.status_name}: {message}")
''']
    errors = [(name, value) for name, value in statuses.items if value != 0]
    for name, _ in errors:
        bases = ", ".join(["DDPError"] + ([f"builtins.{BUILTIN_BASE_OF_STATUS[name]}"]
                                          if name in BUILTIN_BASE_OF_STATUS else []))
        out.append(f'\nclass {exception_name(name)}({bases}):\n    """{name}"""\n    __module__ = "ddp"\n')
    out.append("\n_ERROR_OF_STATUS = {")
    out += [f"    {value}: {exception_name(name)}," for name, value in errors]
    out.append("}")
    out.append('''

def _check_status(status, function, arguments):
    """ctypes errcheck: a non-zero ddp_status becomes its exception."""
    if status != 0:
        message = ddp_last_error_message().decode("utf-8", "replace")
        raise _ERROR_OF_STATUS.get(status, DDPError)(status, message)
    return status''')
    return "\n".join(out)
