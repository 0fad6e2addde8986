"""Horovod's two start-of-training calls: parameters and optimizer state
made root's on every rank."""
import numpy as np
import torch

from .._communicator import current_world


def broadcast_parameters(params, root=0, comm=None, timeout=None):
    """Gives every rank root's values of params, in place, and returns them:
    a state_dict() (parameters and buffers by name), named_parameters() or
    any (name, tensor) pairs, or a list of tensors. Named tensors travel in
    name order, so ranks that listed them in different orders agree; a
    tensor listed under two names (tied weights) travels once."""
    comm = comm if comm is not None else current_world()
    items = params.items() if isinstance(params, dict) else list(params)
    if not all(isinstance(item, tuple) and len(item) == 2 for item in items):
        return comm.broadcast(items, root=root, timeout=timeout)
    named, seen = {}, set()
    for name, tensor in items:
        where = (tensor.data_ptr(), tensor.dtype, tensor.numel())
        if where not in seen:
            seen.add(where)
            named[name] = tensor
    comm.broadcast(named, root=root, timeout=timeout)
    return params


def broadcast_optimizer_state(optimizer, root=0, comm=None, timeout=None):
    """Makes optimizer's state and hyperparameters (learning rates, betas,
    step counts, moments) root's on every rank. A rank whose optimizer has
    no state yet while root's has (a checkpoint loaded on root alone) first
    makes it, by a step with zero gradients whose changes to the
    parameters and gradients are undone. Raises MismatchError on every rank,
    naming the first differing entry, if the optimizers differ in kind or
    in their parameters' shapes."""
    comm = comm if comm is not None else current_world()
    root_has_state = np.array([1 if optimizer.state else 0], dtype=np.int32)
    comm.broadcast(root_has_state, root=root, timeout=timeout)
    if root_has_state[0] and not optimizer.state:
        _make_state(optimizer)
    state = optimizer.state_dict()
    optimizer.load_state_dict(comm.sync_optimizer_state(state, root=root, timeout=timeout))


def _make_state(optimizer):
    """The optimizer's state made by one step with zero gradients; the
    parameters and their gradients are put back after it."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved = [(p.detach().clone(), p.grad) for p in params]
    local_step = getattr(optimizer, "_local_step", optimizer.step)  # DistributedOptimizer's: no averaging
    with torch.no_grad():
        for p in params:
            p.grad = torch.zeros_like(p)
        local_step()
        for p, (value, grad) in zip(params, saved):
            p.copy_(value)
            p.grad = grad
