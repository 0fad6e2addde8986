"""PyTorch tensors as torch users pass them, across real MPI ranks (run under
`mpirun -np 2` and `-np 3` by scripts/run-python-tests): parameters that
require grad, model.parameters() (a generator), and ops given as ddp.Op or
torch.distributed.ReduceOp. mpi4py computes the references independently."""
import os

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


@pytest.fixture(scope="module")
def comm():
    with ddp.init(timeout=60) as world:
        yield world


def model_of_rank(rank):
    torch.manual_seed(rank)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def test_broadcast_of_model_parameters_writes_them_in_place(comm):
    model = model_of_rank(comm.rank)
    params = list(model.parameters())
    result = comm.broadcast(model.parameters(), root=0)  # a generator of tensors that require grad
    assert [r is p for r, p in zip(result, params)] == [True] * len(params)
    roots = WORLD.bcast([p.detach().numpy().copy() for p in params], root=0)
    for param, root_value in zip(params, roots):
        np.testing.assert_array_equal(param.detach().numpy(), root_value)
        assert param.requires_grad and param.grad_fn is None
    assert comm.check_replicas(model.parameters())
    # Autograd still works on them: a backward pass after the broadcast.
    model(torch.ones(3, 5)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_allreduce_of_a_loss_that_requires_grad(comm):
    prediction = torch.tensor([comm.rank + 1.0, 2.0], requires_grad=True)
    loss = (prediction * 2).sum()  # not a leaf: it has a grad_fn
    assert comm.allreduce(loss, op=ddp.Op.AVG) is loss
    assert loss.item() == pytest.approx(np.mean([2.0 * (r + 1) + 4.0 for r in range(comm.size)]))
    leaf = torch.full((3,), float(comm.rank), requires_grad=True)
    assert comm.allreduce(leaf) is leaf
    np.testing.assert_array_equal(leaf.detach().numpy(), np.full(3, sum(range(comm.size)), np.float32))


def test_a_backward_pass_that_needs_the_values_before_a_reduction_raises(comm):
    """As after torch's own in-place ops: the write bumps the version counter."""
    x = torch.ones(4, requires_grad=True)
    y = x.exp()  # exp keeps its result for the backward pass
    comm.allreduce(y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    z = x * 2  # mul keeps x, not z: reducing z leaves its backward pass valid
    comm.allreduce(z, op=ddp.Op.AVG)
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2.0, np.float32))


@pytest.mark.parametrize("op", [ddp.Op.SUM, ddp.Op.AVG, ddp.Op.MIN, ddp.Op.MAX, ddp.Op.PROD,
                                dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN,
                                dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT],
                         ids=str)
def test_ops_as_enums_reduce_as_their_names(comm, op):
    name = {"SUM": "sum", "AVG": "avg", "MIN": "min", "MAX": "max", "PROD": "prod",
            "PRODUCT": "prod"}[op.name]
    mine = torch.arange(1, 5, dtype=torch.float64) * (comm.rank + 1)
    comm.allreduce(mine, op=op)
    every = np.stack([np.arange(1, 5, dtype=np.float64) * (r + 1) for r in range(comm.size)])
    want = {"sum": every.sum(0), "avg": every.mean(0), "min": every.min(0), "max": every.max(0),
            "prod": every.prod(0)}[name]
    np.testing.assert_allclose(mine.numpy(), want)


def test_an_op_torch_has_and_libddp_lacks_fails_every_rank_at_once(comm):
    bad_rank = comm.size - 1
    tensors = [torch.ones(4), torch.ones(2, requires_grad=True)]
    if comm.rank == bad_rank:
        with pytest.raises(ValueError, match="expected ddp.Op") as caught:
            comm.allreduce(tensors, op=dist.ReduceOp.BAND, timeout=PEER_TIMEOUT)
        assert "BAND" in str(caught.value)
    else:
        with pytest.raises(ddp.MismatchError) as caught:
            comm.allreduce(tensors, op=ddp.Op.SUM, timeout=PEER_TIMEOUT)
        assert f"rank {bad_rank} passed invalid arguments to allreduce" in caught.value.message
        assert "BAND" in caught.value.message
    comm.allreduce([np.ones(2)])  # every rank is in step again


class TiedNet(torch.nn.Module):
    """Parameters, buffers (batch norm's, an int64 counter among them) and a
    weight used twice (state_dict lists it under two names)."""

    def __init__(self, rank, extra=False):
        super().__init__()
        torch.manual_seed(rank)
        self.embed = torch.nn.Linear(6, 6, bias=False)
        self.norm = torch.nn.BatchNorm1d(6)
        self.out = torch.nn.Linear(6, 6, bias=False)
        self.out.weight = self.embed.weight
        if extra:
            self.more = torch.nn.Linear(6, 2)
        with torch.no_grad():
            self.norm.running_mean.fill_(rank)
            self.norm.num_batches_tracked.fill_(rank + 3)

    def forward(self, x):
        return self.out(self.norm(self.embed(x)))


def gathered(tensors):
    """Every rank's copies of tensors, by mpi4py."""
    return WORLD.allgather([t.detach().numpy().copy() for t in tensors])


@pytest.mark.parametrize("given", ["state_dict", "named_parameters", "parameters"])
def test_broadcast_parameters_as_horovod_takes_them(comm, given):
    model = TiedNet(comm.rank)
    params = {"state_dict": model.state_dict, "named_parameters": model.named_parameters,
              "parameters": model.parameters}[given]()
    ddp.torch.broadcast_parameters(params, root=0)
    # named_parameters() and parameters() leave the buffers (batch norm's) as they were.
    every = gathered(model.state_dict().values() if given == "state_dict" else model.parameters())
    for rank_values in every[1:]:
        for mine, roots in zip(rank_values, every[0]):
            np.testing.assert_array_equal(mine, roots)
    if given == "state_dict":
        assert int(model.norm.num_batches_tracked) == 3
        assert float(model.norm.running_mean[0]) == 0.0
    assert model.out.weight is model.embed.weight
    assert comm.check_replicas(model.parameters())


def test_broadcast_parameters_of_different_models_fails_every_rank(comm):
    model = TiedNet(comm.rank, extra=comm.rank == comm.size - 1)
    with pytest.raises(ddp.MismatchError, match="rank"):
        ddp.torch.broadcast_parameters(model.state_dict(), root=0, timeout=PEER_TIMEOUT)
    comm.allreduce([np.ones(2)])  # every rank is in step again


def test_broadcast_optimizer_state_from_a_root_that_stepped(comm):
    """Root's optimizer has state (as after loading a checkpoint there); the
    others are new, with another learning rate: all end with root's."""
    model = TiedNet(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (comm.rank + 1))
    if comm.rank == 0:
        for _ in range(2):
            optimizer.zero_grad()
            model(torch.randn(4, 6)).pow(2).sum().backward()
            optimizer.step()
    ddp.torch.broadcast_parameters(model.state_dict(), root=0)
    before = [p.detach().clone() for p in model.parameters()]
    ddp.torch.broadcast_optimizer_state(optimizer, root=0)
    for p, was in zip(model.parameters(), before):  # the state-making step changed nothing
        assert torch.equal(p, was)
    assert optimizer.param_groups[0]["lr"] == 0.01
    state = optimizer.state_dict()["state"]
    moments = [state[i][key] for i in sorted(state) for key in ("step", "exp_avg", "exp_avg_sq")]
    every = gathered(moments)
    for rank_values in every[1:]:
        for mine, roots in zip(rank_values, every[0]):
            np.testing.assert_array_equal(mine, roots)
    assert float(moments[0]) == 2.0  # root's step count
    # Training goes on alike everywhere.
    optimizer.zero_grad()
    model(torch.ones(4, 6)).sum().backward()
    optimizer.step()
    assert comm.check_replicas(model.parameters())
