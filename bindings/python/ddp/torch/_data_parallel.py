"""ddp.torch.DistributedDataParallel: torch DDP's wrapper over libddp's
reducer. loss.backward() returns with every gradient averaged over the
ranks; each bucket starts on its way while backward still computes the
layers before it."""
import contextlib

import torch

from .._agreement import CheckedCall
from .._communicator import current_world
from .._ops import Op
from ._broadcast import broadcast_parameters
from ._gradient_buckets import GradientBuckets


class DistributedDataParallel(torch.nn.Module):
    """Wraps `module` as torch.nn.parallel.DistributedDataParallel does: the
    parameters and buffers start as rank 0's; every backward pass averages
    the gradients of the parameters that require grad, in buckets of
    bucket_cap_mb MiB (None: libddp's default) that are the gradients'
    storage (.grad is a view into its bucket).

    find_unused_parameters: a parameter may get no gradient in a step, on
    some ranks or all (it then counts as zeros; where no rank used it, its
    .grad is left as it was). Without it such a parameter fails the step on
    every rank, naming it. broadcast_buffers: every forward in training
    mode starts from rank 0's buffers (BatchNorm statistics), as torch's.
    timeout: seconds a step may take (None: the communicator's).

    CPU parameters only in this version (the buckets live in host memory).
    """

    def __init__(self, module, comm=None, bucket_cap_mb=None, find_unused_parameters=False,
                 broadcast_buffers=True, timeout=None):
        super().__init__()
        comm = comm if comm is not None else current_world()
        with CheckedCall(comm, "reducer_create", timeout=timeout):
            if not isinstance(module, torch.nn.Module):
                raise TypeError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
            named = [(name, param) for name, param in module.named_parameters()
                     if param.requires_grad]
            if not named:
                raise ValueError("module has no parameter that requires grad: nothing to average")
        self.module = module
        self.find_unused_parameters = bool(find_unused_parameters)
        self.broadcast_buffers = bool(broadcast_buffers)
        self._comm = comm
        self._timeout = timeout
        self._buckets = GradientBuckets(comm, named, Op.AVG, bucket_cap_mb, timeout,
                                        used_flags=self.find_unused_parameters)
        broadcast_parameters(module.state_dict(), root=0, comm=comm, timeout=timeout)
        self._sync = True
        self._backward_open = False  # a gradient was marked; the end of backward is queued
        for index, param in enumerate(self._buckets.params):
            param.register_hook(self._before_gradient_hook(index))
            param.register_post_accumulate_grad_hook(self._gradient_hook(index))

    def forward(self, *inputs, **kwargs):
        buckets = self._buckets
        if buckets.step_open:  # a backward pass raised between its first gradient and its end
            self._backward_open = False
            buckets.fail_and_raise("the last backward pass did not finish on this rank")
        if self.training and self.broadcast_buffers:
            buffers = list(self.module.buffers())
            if buffers:
                self._comm.broadcast(buffers, root=0, timeout=self._timeout)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients on this rank only; the
        first backward pass after it averages the sum, as torch's no_sync."""
        sync, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = sync

    def _before_gradient_hook(self, index):
        def before_gradient(grad):
            if self._sync:  # refused before autograd writes into a bucket on the wire
                self._buckets.refuse_while_marked(
                    index, "got a second gradient in one backward pass (reentrant backward?)")
            return grad
        return before_gradient

    def _gradient_hook(self, index):
        def gradient_done(param):
            if not self._sync:
                return
            if not self._backward_open:
                torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
                self._backward_open = True
            self._buckets.mark(index)
        return gradient_done

    def _end_of_backward(self):
        if not self._backward_open:
            return
        self._backward_open = False
        buckets = self._buckets
        unused = buckets.unmarked()
        if unused and not self.find_unused_parameters:
            buckets.fail_and_raise(
                f"parameter {buckets.names[unused[0]]} got no gradient in this backward pass"
                + (f" ({len(unused) - 1} more did not either)" if len(unused) > 1 else "")
                + "; pass find_unused_parameters=True to DistributedDataParallel if a step may "
                "leave parameters unused")
        buckets.finish(unused)
