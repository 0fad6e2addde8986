"""Reduction ops by name ("sum", "avg", ...), as every call takes them."""
from . import _ffi

OP_OF_NAME = {"sum": _ffi.DDP_OP_SUM, "avg": _ffi.DDP_OP_AVG, "mean": _ffi.DDP_OP_AVG,
              "min": _ffi.DDP_OP_MIN, "max": _ffi.DDP_OP_MAX, "prod": _ffi.DDP_OP_PROD}


def op_value(op):
    """The ddp_op of a name (or of a ddp_op itself)."""
    if isinstance(op, str) and op.lower() in OP_OF_NAME:
        return OP_OF_NAME[op.lower()]
    if isinstance(op, _ffi.ddp_op):
        return op
    raise ValueError(f"op {op!r}: expected one of {', '.join(OP_OF_NAME)}")
