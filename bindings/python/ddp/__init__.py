"""libddp for Python: data-parallel training's communication core.

    import ddp
    comm = ddp.init()                       # under mpirun: one process per rank
    params = comm.broadcast(params, root=0) # any tree; same start everywhere
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        ...
        grads = comm.allreduce_gradients(grads)    # the mean; one fused call
        loss = comm.allreduce(loss, op="avg")      # numbers come back as numbers
    # finalized at exit (or use `with ddp.init() as comm:`)

Every collective takes an array, a number, or a tree of them (dicts, lists,
tuples, dataclasses, JAX pytrees). Writable arrays (NumPy, or anything with
__dlpack__, __cuda_array_interface__ or the buffer protocol) are used in
place, never copied; JAX arrays and numbers come back as new values. The op
defaults to "sum" (as MPI, mpi4py and torch.distributed); ask for "avg" (or
ddp.Op.AVG, or torch.distributed.ReduceOp.AVG). A generator of arrays, such as
model.parameters(), is read into a list (which comes back).
"""
from ._communicator import Communicator, ReplicaCheck, Request, SubCommunicator, init, init_local
from ._group import Grouped, group
from ._ops import Op
from ._reducer import Reducer
from ._ffi import (AlreadyInitializedError, BackendError, BufferTooSmallError, DDPError,
                   InternalError, InvalidArgumentError, MismatchError, NotInitializedError,
                   OutOfMemoryError, TimeoutError, UnsupportedError)
from ._ffi import ddp_version_string as _version_string
from ._sharding import ShardedSampler, shard_count, shard_indices
from ._timeline import dump_flight_recorder, timeline

__version__ = _version_string().decode()

__all__ = ["init", "init_local", "group", "Grouped", "Op", "Communicator", "SubCommunicator", "Request", "ReplicaCheck", "Reducer", "shard_indices", "shard_count",
           "ShardedSampler", "DDPError", "InvalidArgumentError", "MismatchError",
           "UnsupportedError", "NotInitializedError", "AlreadyInitializedError", "TimeoutError",
           "BackendError", "OutOfMemoryError", "BufferTooSmallError", "InternalError",
           "timeline", "dump_flight_recorder"]
