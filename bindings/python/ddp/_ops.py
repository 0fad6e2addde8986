"""Reduction ops: ddp.Op, names ("sum", "avg", ...), and enums of those names
(torch.distributed.ReduceOp.AVG), accepted wherever an op is."""
import enum

from . import _ffi


class Op(enum.IntEnum):
    """A reduction op, as ddp.h's ddp_op: AVG is SUM divided by the world size
    (floating types only); integer SUM and PROD wrap around."""
    SUM = _ffi.DDP_OP_SUM
    AVG = _ffi.DDP_OP_AVG
    MIN = _ffi.DDP_OP_MIN
    MAX = _ffi.DDP_OP_MAX
    PROD = _ffi.DDP_OP_PROD


OP_OF_NAME = {"sum": Op.SUM, "avg": Op.AVG, "mean": Op.AVG, "min": Op.MIN, "max": Op.MAX,
              "prod": Op.PROD, "product": Op.PROD}  # product: torch's name


def op_value(op):
    """The ddp_op of an op given as ddp.Op, a name, or another enum whose
    member name is one (torch.distributed.ReduceOp.SUM)."""
    if isinstance(op, (Op, _ffi.ddp_op)):
        return _ffi.ddp_op(int(op))
    name = op if isinstance(op, str) else getattr(op, "name", None)
    if isinstance(name, str) and name.lower() in OP_OF_NAME:
        return _ffi.ddp_op(int(OP_OF_NAME[name.lower()]))
    raise ValueError(f"op {op!r}: expected ddp.Op (SUM, AVG, MIN, MAX, PROD) or one of the names "
                     f"{', '.join(OP_OF_NAME)}")
