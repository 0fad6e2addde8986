"""A model's gradients kept inside a reducer's buckets, as torch tensors
(torch DDP's gradient_as_bucket_view): what DistributedDataParallel and
DistributedOptimizer share.

Each parameter's .grad is made its bucket view the first time backward gives
it a gradient; autograd then accumulates into the bucket itself, and no
gradient is packed or copied. When torch puts another tensor there
(zero_grad(set_to_none=True), or a user assigning .grad), the next gradient
is copied into the view and .grad made the view again, so training goes on
as before. Once a gradient is marked ready its bucket may be on the wire: a
gradient that arrives then, or a .grad replaced or changed in place then
(seen by torch's version counter), would make ranks differ, so it ends the
step on every rank: this rank fails the reducer's step, which its peers'
wait raises as MismatchError naming it, and raises its own error.

Each owner gets a communicator of its own (a split of the one given, with
the same ranks), because a communicator runs one reducer step at a time and
two models may be in one backward pass (a GAN, an encoder and a decoder).
"""
import collections
import weakref

import torch

from .._agreement import CheckedCall
from .._reducer import Reducer

# The extra float32 gradient, one flag per parameter, that tells every rank
# which parameters any rank used (find_unused_parameters): averaged, a flag
# above zero means "used somewhere".
USED_FLAGS = "<parameters used in this step>"


class GradientBuckets:
    """named_parameters' gradients in one reducer reducing with `op`;
    used_flags: also learn each step which parameters some rank used.
    check: called inside the creation's argument checks (a bad argument
    there fails every rank at once)."""

    def __init__(self, comm, named_parameters, op, bucket_cap_mb, timeout, used_flags=False,
                 check=None):
        with CheckedCall(comm, "comm_split", timeout=timeout):
            if check is not None:
                check()
            named_parameters = list(named_parameters)
            fusion_bytes = _fusion_bytes(bucket_cap_mb)
        self.comm = comm.split(0)
        self.names = [name for name, _ in named_parameters]
        self.params = [param for _, param in named_parameters]
        like = collections.OrderedDict()
        if used_flags:  # first: the reducer buckets in reverse order, so it travels last
            like[USED_FLAGS] = torch.zeros(len(self.params), dtype=torch.float32)
        like.update((name, param.detach()) for name, param in named_parameters)
        self._reducer = Reducer(self.comm, like, op=op, fusion_bytes=fusion_bytes,
                                timeout=timeout)
        views = list(self._reducer.gradients.values())
        self._flags = views.pop(0) if used_flags else None
        self._offset = 1 if used_flags else 0  # a parameter's reducer index is index + offset
        self.views = views
        self.marked = [False] * len(self.params)
        self._versions = [0] * len(self.params)  # each view's version when it was marked
        self.rank = comm.rank

    @property
    def step_open(self):
        return any(self.marked)

    def owns_grad(self, index):
        """Whether parameter `index`'s .grad is its bucket view."""
        grad, view = self.params[index].grad, self.views[index]
        return grad is not None and grad.data_ptr() == view.data_ptr() and \
            grad.shape == view.shape and grad.stride() == view.stride()

    def adopt(self, index):
        """Makes parameter `index`'s .grad its bucket view, holding the
        gradient it has now (zeros when it has none)."""
        if self.owns_grad(index):
            return
        param, view = self.params[index], self.views[index]
        grad = param.grad
        if grad is None:
            view.zero_()
        elif grad.layout != torch.strided:
            raise TypeError(f"parameter {self.names[index]} has a {grad.layout} gradient; "
                            "only dense gradients are reduced")
        else:
            view.copy_(grad)
        param.grad = view

    def mark(self, index):
        """Parameter `index`'s gradient is final for this step: into its
        bucket, and the bucket on its way once complete."""
        try:
            self.adopt(index)
        except Exception as error:
            self.fail(f"{type(error).__name__}: {error}")
            raise
        self._versions[index] = self.views[index]._version
        self._reducer.mark_ready(index + self._offset)  # fails the step itself on a bad mark
        self.marked[index] = True

    def refuse_while_marked(self, index, why):
        """Raises (after ending the step on every rank) when parameter
        `index` is already on its way: `why` says what the caller did."""
        if self.marked[index]:
            self.fail_and_raise(f"parameter {self.names[index]} {why}")

    def check_untouched(self, after):
        """Ends the step on every rank, naming the parameter, when a marked
        gradient was changed in place since (its bucket may have been on
        the wire); `after` says since what."""
        for index, marked in enumerate(self.marked):
            if marked and self.views[index]._version != self._versions[index]:
                self.fail_and_raise(
                    f"parameter {self.names[index]}: its gradient was changed in place after "
                    f"{after}, while its bucket may have been on the wire")

    def finish(self, unused=(), used_before=()):
        """Ends the step on every rank: the `unused` parameters (no gradient
        on this rank this step) go in as they are (zeros when they have
        none). With used flags, a parameter counts as used on this rank when
        marked or in `used_before` (gradients accumulated under no_sync),
        and one that no rank used keeps no .grad where it had none, as
        torch DDP's."""
        had_none = []
        if self._flags is not None:
            used = [marked or index in used_before for index, marked in enumerate(self.marked)]
            self._flags.copy_(torch.tensor(used, dtype=torch.float32))
            had_none = [index for index in unused if self.params[index].grad is None]
        for index in unused:
            self.mark(index)
        if self._flags is not None:
            self._reducer.mark_ready(0)
        try:
            self._reducer.wait()
        finally:
            self.marked = [False] * len(self.params)
        for index in had_none:
            if self._flags[index] == 0:
                self.params[index].grad = None

    def unmarked(self):
        return [index for index, marked in enumerate(self.marked) if not marked]

    def fail(self, reason):
        """Ends the step as failed on every rank (see the module doc)."""
        try:
            self._reducer.fail_step(reason)
        finally:
            self.marked = [False] * len(self.params)

    def fail_and_raise(self, reason):
        self.fail(reason)
        raise RuntimeError(f"{reason} (rank {self.rank}; the step failed on every rank)")


def _fusion_bytes(bucket_cap_mb):
    """torch DDP's bucket_cap_mb (MiB, None: libddp's default) in bytes."""
    if bucket_cap_mb is None:
        return None
    if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) or \
            not 0 < bucket_cap_mb < 2**40:
        raise ValueError(f"bucket_cap_mb {bucket_cap_mb!r}: must be a positive number of MiB")
    return max(1, int(bucket_cap_mb * 2**20))


def checked_named_parameters(named_parameters, all_parameters, where):
    """(name, parameter) pairs for exactly `all_parameters`: named as given
    (every one once), or by position when named_parameters is None."""
    if named_parameters is None:
        return [(f"{where}[{index}]", param) for index, param in enumerate(all_parameters)]
    named = list(named_parameters)
    if not all(isinstance(item, tuple) and len(item) == 2 for item in named):
        raise TypeError("named_parameters: expected (name, parameter) pairs, as "
                        "model.named_parameters() gives")
    name_of = {}
    for name, param in named:
        if id(param) in name_of and name_of[id(param)] != name:
            raise ValueError(f"named_parameters names one parameter twice: {name_of[id(param)]} "
                             f"and {name}")
        name_of[id(param)] = name
    missing = [index for index, param in enumerate(all_parameters) if id(param) not in name_of]
    if missing:
        raise ValueError(f"named_parameters lacks {len(missing)} of the optimizer's parameters "
                         f"(the first: {where}[{missing[0]}])")
    return [(name_of[id(param)], param) for param in all_parameters]


def hooks_for(owner, params, before_gradient, gradient_done):
    """Registers, on each parameter, owner.<before_gradient>(index) before
    autograd accumulates its gradient and owner.<gradient_done>(index)
    after, from its gradient accumulator's own hook, as torch DDP and
    Horovod do: so after the user's post-accumulate hooks (a hook that
    clips or replaces .grad is averaged as torch DDP averages it). The
    hooks hold `owner` weakly, and are removed when it is collected, so a
    dropped wrapper stops acting on its parameters."""
    owner_ref = weakref.ref(owner)
    handles, accumulators = [], []

    def make(index):
        def before(grad):
            live = owner_ref()
            if live is not None:
                getattr(live, before_gradient)(index)
            return grad

        def after(grad_inputs, grad_outputs):
            live = owner_ref()
            if live is not None:
                getattr(live, gradient_done)(index)
        return before, after

    for index, param in enumerate(params):
        before, after = make(index)
        with torch.enable_grad():  # a wrapper made under no_grad too
            accumulator = param.view_as(param).grad_fn.next_functions[0][0]
        accumulators.append(accumulator)  # kept: torch holds a leaf's accumulator weakly
        handles.append(param.register_hook(before))
        handles.append(accumulator.register_hook(after))
    owner._gradient_accumulators = accumulators

    def remove():
        for handle in handles:
            handle.remove()
    weakref.finalize(owner, remove)
