"""ddp.torch.DistributedOptimizer: Horovod's wrapper of a torch optimizer
over libddp's reducer. Gradients start on their way as backward finishes
them; step() (or synchronize()) waits for them, then steps."""
import contextlib

import torch

from .._communicator import current_world
from .._ops import Op
from ._gradient_buckets import GradientBuckets, checked_named_parameters, hooks_for


def DistributedOptimizer(optimizer, named_parameters=None, backward_passes_per_step=1, op=Op.AVG,
                         comm=None, bucket_cap_mb=None, timeout=None):
    """`optimizer` (any torch.optim.Optimizer) whose step() first reduces the
    gradients of its parameters over the ranks with `op`, as
    hvd.DistributedOptimizer: a new optimizer of a subclass of its class,
    sharing its parameter groups and state.

    named_parameters: model.named_parameters(), to name parameters in
    errors. backward_passes_per_step: backward passes whose gradients add
    up locally before one reduction (gradient accumulation); a parameter's
    gradient starts on its way in the last of them, so step() must follow
    it. bucket_cap_mb: the buckets' size (None: libddp's default). The
    gradients live in the buckets (.grad is a view into one), as torch DDP's
    gradient_as_bucket_view.

    A parameter that got no gradient by step() goes in as zeros (its .grad
    becomes zeros), as Horovod's. CPU parameters only in this version.
    """
    comm = comm if comm is not None else current_world()
    cls = type(type(optimizer).__name__, (_DistributedOptimizer, type(optimizer)),
               {"__doc__": _DistributedOptimizer.__doc__})
    distributed = cls.__new__(cls)
    # The same param_groups, state and hooks; not an instance's own step or
    # zero_grad, which would hide this class's. An LR scheduler made before
    # wraps the instance's step to see it called: step() steps through it.
    distributed.__dict__.update((key, value) for key, value in optimizer.__dict__.items()
                                if key not in ("step", "zero_grad"))
    distributed._inner_step = optimizer.__dict__.get("step")
    distributed._start(comm, named_parameters, backward_passes_per_step, op, bucket_cap_mb,
                       timeout)
    return distributed


class _DistributedOptimizer:
    """A torch optimizer whose step() averages the gradients over the ranks
    first; see ddp.torch.DistributedOptimizer."""

    def _start(self, comm, named_parameters, backward_passes_per_step, op, bucket_cap_mb, timeout):
        named = []

        def check():
            params = [param for group in self.param_groups for param in group["params"]
                      if param.requires_grad]
            named.extend(checked_named_parameters(named_parameters, params, "optimizer parameter"))
            if isinstance(backward_passes_per_step, bool) or \
                    not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
                raise ValueError(f"backward_passes_per_step {backward_passes_per_step!r}: "
                                 "must be a positive int")
        # op is checked by the reducer's creation, on every rank at once too
        self._buckets = GradientBuckets(comm, named, op, bucket_cap_mb, timeout, check=check)
        self.backward_passes_per_step = backward_passes_per_step
        self._passes = [0] * len(named)  # backward passes each parameter got since the last step
        self._synchronized = False
        self._should_synchronize = True
        self._backward_running = False  # a gradient came; the end of its backward has not yet
        hooks_for(self, self._buckets.params, "_before_gradient", "_gradient_done")

    def _before_gradient(self, index):
        self._buckets.refuse_while_marked(
            index, f"got a gradient after its backward_passes_per_step="
            f"{self.backward_passes_per_step} passes and before step()")

    def _gradient_done(self, index):
        if not self._backward_running:
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            self._backward_running = True
        self._passes[index] += 1
        self._synchronized = False
        if self._passes[index] == self.backward_passes_per_step:
            self._buckets.mark(index)

    def _end_of_backward(self):
        self._backward_running = False

    def _after_a_failed_backward(self):
        """A backward pass raised on this rank after some gradients were on
        their way, and the caller went on: that step ends as failed here, as
        its peers' wait expects; the error was raised then. True if so."""
        if not self._backward_running:
            return False
        self._backward_running = False
        self._passes = [0] * len(self._passes)
        if self._buckets.step_open:
            self._buckets.fail("a backward pass raised on this rank before its end")
        return True

    def synchronize(self):
        """Waits until every gradient is averaged over the ranks (collective):
        call it before reading or changing the gradients (clipping), then
        step() inside skip_synchronize(). Raises on every rank, naming the
        parameter, when one's .grad was replaced or changed in place after
        backward gave it to its bucket (its average would be lost, or its
        bucket was changed on the wire)."""
        buckets = self._buckets
        if self._after_a_failed_backward():
            raise RuntimeError("the last backward pass raised before its end: no gradients to "
                               "average (zero_grad() and compute them again)")
        for index in range(len(buckets.params)):
            if buckets.marked[index] and not buckets.owns_grad(index):
                buckets.fail_and_raise(
                    f"parameter {buckets.names[index]}: its .grad was replaced (zero_grad, or an "
                    "assignment) after backward gave it to its bucket and before step(); its "
                    "average would be lost")
        buckets.check_untouched("backward gave it to its bucket (call synchronize() before "
                                "changing gradients)")
        buckets.finish(buckets.unmarked())
        self._passes = [0] * len(self._passes)
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside does not synchronize (call synchronize() first)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if closure is not None:
            self._buckets.fail_and_raise(
                "DistributedOptimizer.step takes no closure: compute the loss and call "
                "backward() before step()")
        if self._should_synchronize and not self._synchronized:
            self.synchronize()
        self._synchronized = False
        return self._local_step()

    def _local_step(self):
        """The wrapped optimizer's own step, with no averaging."""
        return self._inner_step() if self._inner_step is not None else super().step()

    def zero_grad(self, set_to_none=True):
        self._after_a_failed_backward()
        if self._buckets.step_open:
            self._buckets.fail_and_raise(
                "zero_grad() was called after backward() and before step() or synchronize(): "
                "the gradients on their way would be lost")
        self._passes = [0] * len(self._passes)
        return super().zero_grad(set_to_none=set_to_none)
