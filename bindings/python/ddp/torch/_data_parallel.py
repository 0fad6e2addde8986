"""ddp.torch.DistributedDataParallel: torch DDP's wrapper over libddp's
reducer. loss.backward() returns with every gradient averaged over the
ranks; each bucket starts on its way while backward still computes the
layers before it."""
import contextlib

import torch

from .._communicator import current_world
from .._ops import Op
from ._broadcast import broadcast_parameters
from ._gradient_buckets import GradientBuckets, hooks_for


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
    timeout: seconds a step may take (None or 0: the communicator's).

    CPU parameters only in this version (the buckets live in host memory).
    """

    def __init__(self, module, comm=None, bucket_cap_mb=None, find_unused_parameters=False,
                 broadcast_buffers=True, timeout=None):
        super().__init__()
        comm = comm if comm is not None else current_world()
        named = []

        def check():
            if not isinstance(module, torch.nn.Module):
                raise TypeError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
            named.extend((name, param) for name, param in module.named_parameters()
                         if param.requires_grad)
            if not named:
                raise ValueError("module has no parameter that requires grad: nothing to average")
        self._buckets = GradientBuckets(comm, named, Op.AVG, bucket_cap_mb, timeout,
                                        used_flags=bool(find_unused_parameters), check=check)
        self.module = module
        self.find_unused_parameters = bool(find_unused_parameters)
        self.broadcast_buffers = bool(broadcast_buffers)
        self._timeout = timeout
        broadcast_parameters(module.state_dict(), root=0, comm=self._buckets.comm, timeout=timeout)
        self._sync = True
        self._backward_open = False  # this backward's end is queued
        self._used_unsynced = set()  # parameters given gradients under no_sync since the last step
        hooks_for(self, self._buckets.params, "_before_gradient", "_gradient_done")

    def forward(self, *inputs, **kwargs):
        buckets = self._buckets
        if buckets.step_open:
            # A backward pass raised on this rank between its first gradient and
            # its end, and the caller went on: that step ends as failed here, as
            # its peers' wait already expects; the error was raised then.
            self._backward_open = False
            buckets.fail("a backward pass raised on this rank before its end")
        if self.training and self.broadcast_buffers:
            buffers = list(self.module.buffers())
            if buffers:
                buckets.comm.broadcast(buffers, root=0, timeout=self._timeout)
        output = self.module(*inputs, **kwargs)
        # The end of backward is queued from the graph task that reaches the
        # outputs first, the outermost: a parameter's first gradient may come
        # from a nested one (reentrant checkpointing), which ends too early.
        for tensor in torch.utils._pytree.tree_leaves(output):
            if isinstance(tensor, torch.Tensor) and tensor.grad_fn is not None:
                tensor.grad_fn.register_prehook(self._start_of_backward)
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients on this rank only; the
        first backward pass after it averages the sum, as torch's no_sync."""
        sync, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = sync

    def _start_of_backward(self, grad_outputs=None):
        if self._sync and not self._backward_open:
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            self._backward_open = True

    def _before_gradient(self, index):
        if self._sync:  # refused before autograd writes into a bucket on the wire
            self._buckets.refuse_while_marked(
                index, "got a second gradient in one backward pass (reentrant backward?)")

    def _gradient_done(self, index):
        if not self._sync:
            self._used_unsynced.add(index)
            return
        self._start_of_backward()
        try:
            self._buckets.mark(index)
        except Exception:
            self._backward_open = False  # this backward raises; its end will not run
            raise

    def _end_of_backward(self):
        if not self._backward_open:
            return
        self._backward_open = False
        buckets = self._buckets
        if not buckets.step_open:
            return  # no gradient reached a parameter (torch.autograd.grad): not a step
        buckets.check_untouched("ddp.torch took it for averaging (by a hook that ran later?)")
        unused = buckets.unmarked()
        if unused and not self.find_unused_parameters:
            buckets.fail_and_raise(
                f"parameter {buckets.names[unused[0]]} got no gradient in this backward pass"
                + (f" ({len(unused) - 1} more did not either)" if len(unused) > 1 else "")
                + "; pass find_unused_parameters=True to DistributedDataParallel if a step may "
                "leave parameters unused")
        buckets.finish(unused, self._used_unsynced)
        self._used_unsynced = set()
        for index, param in enumerate(buckets.params):
            if param.grad is not None and not buckets.owns_grad(index):
                # replaced after it was taken (a later hook): the average, as torch DDP's
                param.grad = buckets.views[index]
