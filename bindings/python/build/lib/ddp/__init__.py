"""libddp for Python: data-parallel training's communication core.

    import ddp
    with ddp.init() as comm:                # under mpirun: one process per rank
        comm.broadcast(params, root=0)      # same start everywhere
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            ...
            comm.allreduce(grads, op="avg") # in place, fused, one call for the list

Arrays are NumPy arrays or anything with __dlpack__, __cuda_array_interface__
or the buffer protocol; they are used in place, never copied.
"""
from ._communicator import Communicator, ReplicaCheck, Request, init
from ._ffi import (AlreadyInitializedError, BackendError, BufferTooSmallError, DDPError,
                   InternalError, InvalidArgumentError, MismatchError, NotInitializedError,
                   OutOfMemoryError, TimeoutError, UnsupportedError)
from ._ffi import ddp_version_string as _version_string
from ._sharding import ShardedSampler, shard_count, shard_indices

__version__ = _version_string().decode()

__all__ = ["init", "Communicator", "Request", "ReplicaCheck", "shard_indices", "shard_count",
           "ShardedSampler", "DDPError", "InvalidArgumentError", "MismatchError",
           "UnsupportedError", "NotInitializedError", "AlreadyInitializedError", "TimeoutError",
           "BackendError", "OutOfMemoryError", "BufferTooSmallError", "InternalError"]
