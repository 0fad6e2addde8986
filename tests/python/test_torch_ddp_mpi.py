"""ddp.torch.DistributedDataParallel and DistributedOptimizer across real MPI
ranks (under `mpirun -np 2` and `-np 3`, scripts/run-python-tests), checked
against two references computed in the same run: one process training on
the global batch, and torch's own DistributedDataParallel over gloo on the
same model and data. Each one-rank mistake must fail every rank at once."""
import os
import socket

import numpy as np
import pytest
import torch
import torch.distributed as dist
from mpi4py import MPI

import ddp
import ddp.torch

pytestmark = pytest.mark.skipif("OMPI_COMM_WORLD_SIZE" not in os.environ,
                                reason="needs mpirun (scripts/run-python-tests)")

WORLD = MPI.COMM_WORLD
PEER_TIMEOUT = 20
GLOBAL_BATCH = 12  # splits evenly over 2 and 3 ranks, so the mean of shard means is the global mean
STEPS = 6


@pytest.fixture(scope="module")
def comm():
    with ddp.init(timeout=60) as world:
        yield world


@pytest.fixture(scope="module")
def gloo(comm):
    """torch.distributed over gloo, the reference torch DDP runs on."""
    port = None
    if comm.rank == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    port = WORLD.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank,
                            world_size=comm.size)
    yield
    dist.destroy_process_group()


class Net(torch.nn.Module):
    """Two layers, and a head used only where `use_head` says (find_unused_parameters)."""

    def __init__(self, seed, batch_norm=False, head=False):
        super().__init__()
        torch.manual_seed(seed)
        self.hidden = torch.nn.Linear(6, 16)
        self.norm = torch.nn.BatchNorm1d(16) if batch_norm else torch.nn.Identity()
        self.out = torch.nn.Linear(16, 3)
        self.head = torch.nn.Linear(16, 3) if head else None

    def forward(self, x, use_head=False):
        h = torch.tanh(self.norm(self.hidden(x)))
        return self.out(h) + (self.head(h) if use_head else 0)


def data(step, micro=0):
    generator = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(GLOBAL_BATCH, 6, generator=generator)
    return x, torch.stack([x.sum(1), x[:, 0] * x[:, 1], x.mean(1)], dim=1)


def shard(tensor, comm):
    return tensor[comm.rank::comm.size]


def loss_of(model, x, y, **kwargs):
    return ((model(x, **kwargs) - y) ** 2).mean()


def params_of(model):
    return [p.detach().clone() for p in model.parameters()]


def assert_same(mine, reference, tolerance=1e-5):
    assert len(mine) == len(reference)
    for a, b in zip(mine, reference):
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance)


def one_process_reference(steps=STEPS, accumulate=1, optimizer=torch.optim.SGD, **options):
    """rank 0's initial model trained on the whole batch in one process."""
    model = Net(seed=0)
    opt = optimizer(model.parameters(), **options)
    for step in range(steps):
        opt.zero_grad()
        for micro in range(accumulate):
            loss_of(model, *data(step, micro)).backward()
        opt.step()
    return params_of(model)


@pytest.mark.parametrize("set_to_none", [True, False], ids=["set_to_none", "zeroed"])
def test_ddp_trains_as_one_process_on_the_global_batch(comm, set_to_none):
    model = ddp.torch.DistributedDataParallel(Net(seed=comm.rank), timeout=PEER_TIMEOUT)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    views = [view.data_ptr() for view in model._buckets.views]
    for step in range(STEPS):
        opt.zero_grad(set_to_none=set_to_none)
        x, y = data(step)
        loss_of(model, shard(x, comm), shard(y, comm)).backward()
        # gradient_as_bucket_view: .grad is the bucket's storage after every backward
        assert [p.grad.data_ptr() for p in model.module.parameters()] == views
        opt.step()
    assert_same(params_of(model.module), one_process_reference(lr=0.1, momentum=0.9))
    assert comm.check_replicas(model.parameters())


def test_ddp_matches_torch_ddp_over_gloo_with_batch_norm(comm, gloo):
    ours = ddp.torch.DistributedDataParallel(Net(seed=comm.rank, batch_norm=True))
    theirs = torch.nn.parallel.DistributedDataParallel(Net(seed=comm.rank, batch_norm=True))
    for model in (ours, theirs):
        # SGD, not Adam: the bias before BatchNorm gets only rounding noise as its
        # gradient, which Adam would scale up to whole steps of either sign
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for step in range(STEPS):
            opt.zero_grad()
            x, y = data(step)
            loss_of(model, shard(x, comm), shard(y, comm)).backward()
            opt.step()
    assert_same(params_of(ours.module), params_of(theirs.module))
    assert_same(list(ours.module.buffers()), list(theirs.module.buffers()))


def test_no_sync_accumulates_as_one_process(comm):
    model = ddp.torch.DistributedDataParallel(Net(seed=comm.rank))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        opt.zero_grad()
        with model.no_sync():
            x, y = data(step, 0)
            loss_of(model, shard(x, comm), shard(y, comm)).backward()
        x, y = data(step, 1)
        loss_of(model, shard(x, comm), shard(y, comm)).backward()
        opt.step()
    assert_same(params_of(model.module), one_process_reference(accumulate=2, lr=0.05))


def test_find_unused_parameters_matches_torch_ddp(comm, gloo):
    """The head is used by rank 0 on even steps only: unused on every other
    rank then, and on every rank on odd steps."""
    def train(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        nones = []
        for step in range(STEPS):
            opt.zero_grad()
            x, y = data(step)
            use_head = comm.rank == 0 and step % 2 == 0
            loss_of(model, shard(x, comm), shard(y, comm), use_head=use_head).backward()
            nones.append([p.grad is None for p in model.parameters()])
            opt.step()
        return nones

    ours = ddp.torch.DistributedDataParallel(Net(seed=comm.rank, head=True),
                                             find_unused_parameters=True)
    theirs = torch.nn.parallel.DistributedDataParallel(Net(seed=comm.rank, head=True),
                                                       find_unused_parameters=True)
    assert train(ours) == train(theirs)
    assert_same(params_of(ours.module), params_of(theirs.module))


def test_a_parameter_without_gradient_fails_every_rank(comm):
    """Unused on the last rank only, without find_unused_parameters: that
    rank raises naming it; its peers raise MismatchError naming that rank."""
    model = ddp.torch.DistributedDataParallel(Net(seed=comm.rank, head=True), timeout=PEER_TIMEOUT)
    x, y = data(0)
    last = comm.size - 1
    if comm.rank == last:
        with pytest.raises(RuntimeError, match=r"parameter head\.weight got no gradient"):
            loss_of(model, shard(x, comm), shard(y, comm)).backward()
    else:
        with pytest.raises(ddp.MismatchError) as caught:
            loss_of(model, shard(x, comm), shard(y, comm), use_head=True).backward()
        assert f"rank {last}" in caught.value.message
        assert "head.weight got no gradient" in caught.value.message
    # the next step runs on every rank
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    loss_of(model, shard(x, comm), shard(y, comm), use_head=True).backward()
    opt.step()
    assert comm.check_replicas(model.parameters())


def test_mixed_dtypes_average_as_mpi_does(comm):
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(comm.rank)
            self.a = torch.nn.Parameter(torch.randn(4, 5))
            self.b = torch.nn.Parameter(torch.randn(5, 3).to(torch.bfloat16))
            self.c = torch.nn.Parameter(torch.randn(3, 2).to(torch.float16))

        def forward(self, x):
            h = (x @ self.a).to(torch.bfloat16) @ self.b
            return (h.to(torch.float16) @ self.c).float()

    model = ddp.torch.DistributedDataParallel(Mixed())
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(comm.rank))
    model(x).square().sum().backward()
    local = Mixed()  # the same start (rank 0's), gradients of this rank alone
    local.load_state_dict(model.module.state_dict())
    local(x).square().sum().backward()
    for mine, param in zip(model.module.parameters(), local.parameters()):
        expected = WORLD.allreduce(param.grad.double().numpy(), op=MPI.SUM) / comm.size
        assert mine.grad.dtype == param.dtype
        tolerance = 1e-5 if param.dtype == torch.float32 else 2e-2
        np.testing.assert_allclose(mine.grad.double().numpy(), expected, rtol=tolerance,
                                   atol=tolerance * np.abs(expected).max())


@pytest.mark.parametrize("mistake", ["bucket_cap_mb", "not_a_module", "no_parameters",
                                     "not_on_the_cpu"])
def test_a_bad_ddp_argument_on_one_rank_fails_every_rank(comm, mistake):
    """not_on_the_cpu: torch's meta device stands for a GPU here (none in CI);
    the buckets live in host memory, so such parameters are refused."""
    last = comm.size - 1
    module, options = Net(seed=0), {}
    if comm.rank == last:
        if mistake == "bucket_cap_mb":
            options = {"bucket_cap_mb": -1}
        elif mistake == "not_a_module":
            module = [module]
        elif mistake == "no_parameters":
            module = torch.nn.ReLU()
        else:
            module = module.to("meta")
    if comm.rank == last:
        with pytest.raises((ValueError, TypeError)):
            ddp.torch.DistributedDataParallel(module, timeout=PEER_TIMEOUT, **options)
    else:
        with pytest.raises(ddp.MismatchError) as caught:
            ddp.torch.DistributedDataParallel(module, timeout=PEER_TIMEOUT, **options)
        assert f"rank {last} passed invalid arguments" in caught.value.message
    comm.allreduce([np.ones(2)])  # every rank is in step again


def distributed_optimizer(comm, model, optimizer=None, **options):
    ddp.torch.broadcast_parameters(model.state_dict(), root=0)
    opt = optimizer if optimizer is not None else torch.optim.Adam(model.parameters(), lr=0.01)
    return ddp.torch.DistributedOptimizer(opt, model.named_parameters(), timeout=PEER_TIMEOUT,
                                          **options)


@pytest.mark.parametrize("passes", [1, 2])
def test_distributed_optimizer_trains_as_one_process(comm, passes):
    model = Net(seed=comm.rank)
    opt = distributed_optimizer(comm, model, backward_passes_per_step=passes)
    assert isinstance(opt, torch.optim.Adam)
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(passes):
            x, y = data(step, micro)
            loss_of(model, shard(x, comm), shard(y, comm)).backward()
        opt.step()
    assert_same(params_of(model), one_process_reference(accumulate=passes,
                                                        optimizer=torch.optim.Adam, lr=0.01))
    assert comm.check_replicas(model.parameters())


def test_synchronize_then_clip_then_step(comm):
    model = Net(seed=comm.rank)
    opt = distributed_optimizer(comm, model)
    x, y = data(0)
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    with opt.skip_synchronize():
        opt.step()
    assert comm.check_replicas(model.parameters())


@pytest.mark.parametrize("mistake", ["zero_grad", "grad_assigned", "closure"])
def test_a_mistake_between_backward_and_step_on_one_rank_fails_every_rank(comm, mistake):
    model = Net(seed=comm.rank)
    opt = distributed_optimizer(comm, model)
    x, y = data(0)
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    last = comm.size - 1
    if comm.rank == last:
        with pytest.raises((RuntimeError, ValueError)) as caught:
            if mistake == "zero_grad":
                opt.zero_grad()
            elif mistake == "grad_assigned":
                model.out.bias.grad = torch.zeros(3)
                opt.step()
            else:
                opt.step(lambda: None)
        reason = str(caught.value)
    else:
        with pytest.raises(ddp.MismatchError) as caught:
            opt.step()
        assert f"rank {last}" in caught.value.message
        reason = caught.value.message
    expected = {"zero_grad": "zero_grad() was called after backward()",
                "grad_assigned": "parameter out.bias: its .grad was replaced",
                "closure": "takes no closure"}[mistake]
    assert expected in reason
    opt.zero_grad()  # the next step runs on every rank
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    opt.step()
    assert comm.check_replicas(model.parameters())


def test_a_second_backward_before_step_fails_every_rank(comm):
    model = Net(seed=comm.rank)
    opt = distributed_optimizer(comm, model)
    x, y = data(0)
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    with pytest.raises(RuntimeError, match=r"got a gradient after its backward_passes_per_step=1"):
        loss_of(model, shard(x, comm), shard(y, comm)).backward()
    opt.zero_grad()
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    opt.step()
    assert comm.check_replicas(model.parameters())


@pytest.mark.parametrize("mistake", ["passes", "op", "named_parameters", "bucket_cap_mb"])
def test_a_bad_optimizer_argument_on_one_rank_fails_every_rank(comm, mistake):
    model = Net(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    options = {"named_parameters": model.named_parameters()}
    if comm.rank == comm.size - 1:
        options.update({"passes": {"backward_passes_per_step": 0}, "op": {"op": "median"},
                        "named_parameters": {"named_parameters": list(model.named_parameters())[1:]},
                        "bucket_cap_mb": {"bucket_cap_mb": "big"}}[mistake])
        with pytest.raises((ValueError, TypeError)):
            ddp.torch.DistributedOptimizer(opt, timeout=PEER_TIMEOUT, **options)
    else:
        with pytest.raises(ddp.MismatchError) as caught:
            ddp.torch.DistributedOptimizer(opt, timeout=PEER_TIMEOUT, **options)
        assert f"rank {comm.size - 1} passed invalid arguments" in \
            caught.value.message
    comm.allreduce([np.ones(2)])


def test_the_reducer_takes_torch_tensors_and_gives_torch_views(comm):
    like = [torch.zeros(3, requires_grad=True).detach(), torch.zeros(2, 2, dtype=torch.bfloat16)]
    with comm.reducer(like, op=ddp.Op.AVG) as reducer:
        assert [type(g) for g in reducer.gradients] == [torch.Tensor, torch.Tensor]
        assert [g.dtype for g in reducer.gradients] == [torch.float32, torch.bfloat16]
        for gradient in reversed(reducer.gradients):
            gradient.fill_(comm.rank)
            reducer.mark_ready(gradient)
        reducer.wait()
        mean = sum(range(comm.size)) / comm.size
        assert all(torch.all(g.float() == torch.tensor(mean).to(g.dtype).float())
                   for g in reducer.gradients)


# What an independent review found torch users do; each once broke a promise.

def test_two_wrapped_models_in_one_backward_train_as_one_process(comm):
    """An encoder and a decoder, each wrapped, in one backward pass (a GAN's
    shape): each wrapper has a communicator of its own."""
    torch.manual_seed(comm.rank)
    encoder = ddp.torch.DistributedDataParallel(torch.nn.Linear(6, 8))
    decoder = ddp.torch.DistributedDataParallel(torch.nn.Linear(8, 3))
    torch.manual_seed(0)
    ref_encoder, ref_decoder = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)
    ref_encoder.load_state_dict(encoder.module.state_dict())
    ref_decoder.load_state_dict(decoder.module.state_dict())
    opt = torch.optim.SGD([*encoder.parameters(), *decoder.parameters()], lr=0.1)
    ref_opt = torch.optim.SGD([*ref_encoder.parameters(), *ref_decoder.parameters()], lr=0.1)
    for step in range(3):
        x, y = data(step)
        for model, optimizer, rows in (((encoder, decoder), opt, comm),
                                       ((ref_encoder, ref_decoder), ref_opt, None)):
            optimizer.zero_grad()
            xs, ys = (shard(x, rows), shard(y, rows)) if rows else (x, y)
            ((model[1](torch.tanh(model[0](xs))) - ys) ** 2).mean().backward()
            optimizer.step()
    assert_same(params_of(encoder.module) + params_of(decoder.module),
                params_of(ref_encoder) + params_of(ref_decoder))


def test_a_dropped_wrapper_lets_go_of_its_parameters(comm):
    import gc
    module = Net(seed=comm.rank)
    first = ddp.torch.DistributedDataParallel(module)
    del first
    gc.collect()
    again = ddp.torch.DistributedDataParallel(module)
    opt = torch.optim.SGD(again.parameters(), lr=0.1)
    for step in range(2):
        opt.zero_grad()
        x, y = data(step)
        loss_of(again, shard(x, comm), shard(y, comm)).backward()
        opt.step()
    assert comm.check_replicas(again.parameters())


def test_a_hook_replacing_grad_after_ours_gets_the_average(comm, gloo):
    """As torch DDP: a later hook's local .grad is replaced by the average."""
    def train(model):
        for param in model.module.parameters():
            param.register_post_accumulate_grad_hook(
                lambda p: setattr(p, "grad", p.grad.clamp(-0.05, 0.05)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            opt.zero_grad()
            x, y = data(step)
            loss_of(model, shard(x, comm), shard(y, comm)).backward()
            opt.step()
        return params_of(model.module)
    ours = train(ddp.torch.DistributedDataParallel(Net(seed=comm.rank)))
    assert_same(ours, train(torch.nn.parallel.DistributedDataParallel(Net(seed=comm.rank))))


def test_no_sync_use_counts_as_use_with_find_unused_parameters(comm, gloo):
    """Rank 0 alone uses the head, inside no_sync; no rank in the synced pass."""
    def train(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            opt.zero_grad()
            x, y = data(step)
            with model.no_sync():
                loss_of(model, shard(x, comm), shard(y, comm),
                        use_head=comm.rank == 0).backward()
            loss_of(model, shard(x, comm), shard(y, comm)).backward()
            opt.step()
        return params_of(model.module)
    ours = train(ddp.torch.DistributedDataParallel(Net(seed=comm.rank, head=True),
                                                   find_unused_parameters=True))
    theirs = train(torch.nn.parallel.DistributedDataParallel(Net(seed=comm.rank, head=True),
                                                             find_unused_parameters=True))
    assert_same(ours, theirs)
    assert comm.check_replicas(ours)


def test_reentrant_checkpointing_nearest_the_loss(comm):
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(Net):
        def forward(self, x, use_head=False):
            return checkpoint(self.out, torch.tanh(self.hidden(x)), use_reentrant=True)

    model = ddp.torch.DistributedDataParallel(Checkpointed(seed=comm.rank))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = data(step)
        loss_of(model, shard(x, comm), shard(y, comm)).backward()
        opt.step()
    assert_same(params_of(model.module), one_process_reference(lr=0.1))


@pytest.mark.parametrize("wrapper", ["DistributedDataParallel", "DistributedOptimizer"])
def test_a_backward_that_raises_on_one_rank_costs_one_step_on_every_rank(comm, wrapper):
    class MaybeRaise(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, fail):
            ctx.fail = fail
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            if ctx.fail:
                raise ValueError("a backward that fails here")
            return grad, None

    class Failing(Net):
        def forward(self, x, fail=False):  # out's gradients come before the failure
            return self.out(MaybeRaise.apply(torch.tanh(self.hidden(x)), fail))

    if wrapper == "DistributedDataParallel":
        model = ddp.torch.DistributedDataParallel(Failing(seed=comm.rank), timeout=PEER_TIMEOUT)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
    else:
        model = Failing(seed=comm.rank)
        opt = distributed_optimizer(comm, model, optimizer=torch.optim.SGD(model.parameters(),
                                                                           lr=0.1))
    failures = []
    for step in range(4):
        x, y = data(step)
        opt.zero_grad()
        try:
            loss_of(model, shard(x, comm), shard(y, comm),
                    fail=comm.rank == comm.size - 1 and step == 1).backward()
            opt.step()
        except (ValueError, ddp.MismatchError) as error:
            failures.append((step, type(error).__name__))
    expected = "ValueError" if comm.rank == comm.size - 1 else "MismatchError"
    assert failures == [(1, expected)]
    assert comm.check_replicas(model.parameters())


def test_a_scheduler_made_before_wrapping_still_averages(comm):
    model = Net(seed=comm.rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt = distributed_optimizer(comm, model, optimizer=opt)
    for step in range(3):
        opt.zero_grad()
        x, y = data(step)
        loss_of(model, shard(x, comm), shard(y, comm)).backward()
        opt.step()
        scheduler.step()
    assert comm.check_replicas(model.parameters())


@pytest.mark.parametrize("change", ["clip_everywhere", "zeroed_in_place_on_one_rank"])
def test_gradients_changed_in_place_before_step_fail_every_rank(comm, change):
    """Before synchronize() the buckets may be on the wire: clipping there
    (everywhere), or the original optimizer's zero_grad(set_to_none=False)
    on one rank, raises on every rank naming a parameter."""
    model = Net(seed=comm.rank)
    original = torch.optim.SGD(model.parameters(), lr=0.1)
    opt = distributed_optimizer(comm, model, optimizer=original)
    x, y = data(0)
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    changed_here = change == "clip_everywhere" or comm.rank == comm.size - 1
    if change == "clip_everywhere":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
    elif changed_here:
        original.zero_grad(set_to_none=False)
    with pytest.raises((RuntimeError, ddp.MismatchError)) as caught:
        opt.step()
    assert "its gradient was changed in place" in str(caught.value)
    if changed_here:
        assert isinstance(caught.value, RuntimeError)
    opt.zero_grad()
    loss_of(model, shard(x, comm), shard(y, comm)).backward()
    opt.step()
    assert comm.check_replicas(model.parameters())


def test_broadcast_optimizer_state_of_a_distributed_optimizer_from_root_alone(comm):
    """The resume recipe: only root's optimizer has state (a checkpoint)."""
    model = Net(seed=0)
    opt = distributed_optimizer(comm, model)
    if comm.rank == 0:  # root's state, as loaded from a checkpoint
        for param in model.parameters():
            param.grad = torch.ones_like(param)
        opt._local_step()
    ddp.torch.broadcast_optimizer_state(opt, root=0)
    assert comm.check_replicas([opt.state_dict()["state"][0]["exp_avg"]])
