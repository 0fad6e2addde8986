"""libddp for PyTorch programs, with the names torch and Horovod users know.

    import ddp, ddp.torch
    comm = ddp.init()
    model = ddp.torch.DistributedDataParallel(model)       # torch DDP's wrapper
    ...
    loss.backward()                                        # gradients averaged here
    optimizer.step()

or, as Horovod:

    optimizer = ddp.torch.DistributedOptimizer(optimizer, model.named_parameters())
    ddp.torch.broadcast_parameters(model.state_dict(), root=0)
    ddp.torch.broadcast_optimizer_state(optimizer, root=0)

Both keep the gradients inside libddp's reducer buckets (.grad is a view into
one), each bucket on its way while backward computes the layers before it.
Everything else takes torch tensors as they are (comm.allreduce(loss,
op=ddp.Op.AVG)). CPU tensors: the buckets live in host memory in this version.
"""
from ._broadcast import broadcast_optimizer_state, broadcast_parameters
from ._data_parallel import DistributedDataParallel
from ._optimizer import DistributedOptimizer

__all__ = ["DistributedDataParallel", "DistributedOptimizer", "broadcast_parameters",
           "broadcast_optimizer_state"]
