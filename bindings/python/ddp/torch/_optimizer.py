"""ddp.torch.DistributedOptimizer: Horovod's wrapper of a torch optimizer
over libddp's reducer. Gradients start on their way as backward finishes
them; step() (or synchronize()) waits for them, then steps."""
import contextlib

from .._agreement import CheckedCall
from .._communicator import current_world
from .._ops import Op, op_value
from ._gradient_buckets import GradientBuckets, checked_named_parameters


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
    distributed.__dict__.update(optimizer.__dict__)  # the same param_groups, state and hooks
    distributed._start(comm, named_parameters, backward_passes_per_step, op, bucket_cap_mb,
                       timeout)
    return distributed


class _DistributedOptimizer:
    """A torch optimizer whose step() averages the gradients over the ranks
    first; see ddp.torch.DistributedOptimizer."""

    def _start(self, comm, named_parameters, backward_passes_per_step, op, bucket_cap_mb, timeout):
        with CheckedCall(comm, "reducer_create", timeout=timeout):
            params = [param for group in self.param_groups for param in group["params"]
                      if param.requires_grad]
            named = checked_named_parameters(named_parameters, params, "optimizer parameter")
            if isinstance(backward_passes_per_step, bool) or \
                    not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
                raise ValueError(f"backward_passes_per_step {backward_passes_per_step!r}: "
                                 "must be a positive int")
            reduce_op = op_value(op)
        self._buckets = GradientBuckets(comm, named, reduce_op, bucket_cap_mb, timeout)
        self.backward_passes_per_step = backward_passes_per_step
        self._passes = [0] * len(params)  # backward passes each parameter got since the last step
        self._synchronized = False
        self._should_synchronize = True
        for index, param in enumerate(params):
            param.register_hook(self._before_gradient_hook(index))
            param.register_post_accumulate_grad_hook(self._gradient_hook(index))

    def _before_gradient_hook(self, index):
        def before_gradient(grad):
            self._buckets.refuse_while_marked(
                index, f"got a gradient after its backward_passes_per_step="
                f"{self.backward_passes_per_step} passes and before step()")
            return grad
        return before_gradient

    def _gradient_hook(self, index):
        def gradient_done(param):
            self._passes[index] += 1
            self._synchronized = False
            if self._passes[index] == self.backward_passes_per_step:
                self._buckets.mark(index)
        return gradient_done

    def synchronize(self):
        """Waits until every gradient is averaged over the ranks (collective):
        call it before reading the gradients (clipping), then step() inside
        skip_synchronize(). Raises on every rank, naming the parameter,
        when one's .grad was replaced after backward gave it to its bucket."""
        buckets = self._buckets
        for index in range(len(buckets.params)):
            if buckets.marked[index] and not buckets.owns_grad(index):
                buckets.fail_and_raise(
                    f"parameter {buckets.names[index]}: its .grad was replaced (zero_grad, or an "
                    "assignment) after backward gave it to its bucket and before step(); its "
                    "average would be lost")
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
        return super().step()

    def zero_grad(self, set_to_none=True):
        if self._buckets.step_open:
            self._buckets.fail_and_raise(
                "zero_grad() was called after backward() and before step() or synchronize(): "
                "the gradients on their way would be lost")
        self._passes = [0] * len(self._passes)
        return super().zero_grad(set_to_none=set_to_none)
