"""A training step's gradient averaging in PyTorch: ddp.torch against torch's
own DistributedDataParallel over gloo and against a hand-made Horovod-style
loop, on a model's parameter list of torch tensors (CPU, float32).

    mpirun -np 2 .venv/bin/python bench/python_torch_bench.py MODEL.tsv [RUNS]

Each strategy runs the same step: forward, backward, and its gradients
averaged over the ranks (the time until the optimizer could step). The model
is the parameter list of MODEL.tsv with a forward that touches every
parameter once, so backward is cheap and the step is mostly communication;
"no communication" is that step without averaging, and each row's
"communication" is its step time less that one. Strategies:

- ddp.torch DDP: ddp.torch.DistributedDataParallel (averaged inside backward)
- ddp.torch DistributedOptimizer: backward, then synchronize()
- torch DDP (gloo): torch.nn.parallel.DistributedDataParallel, default buckets
- mpi4py Iallreduce from hooks: what a user writes by hand as Horovod does it,
  one MPI_Iallreduce per gradient started as backward finishes it
  (register_post_accumulate_grad_hook), all waited for at the end.

Strategies are interleaved round by round (bench/interleaved.py); the
median (min, max) of RUNS rounds; rank 0 prints.
"""
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import ddp
import ddp.torch
from interleaved import read_shapes, time_interleaved




class Parameters(torch.nn.Module):
    """The model's parameters; forward uses each once (its gradient is x)."""

    def __init__(self, shapes):
        super().__init__()
        self.weights = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(shape))
                                              for shape in shapes)

    def forward(self, x):
        return sum((weight * x).sum() for weight in self.weights)


class HookedIallreduce:
    """A hand-made Horovod-style averaging: each gradient's MPI_Iallreduce
    starts from its post-accumulate hook; wait() finishes them and divides."""

    def __init__(self, model, world):
        self.world = world
        self.requests = []
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(self.start)

    def start(self, param):
        self.requests.append(self.world.Iallreduce(MPI.IN_PLACE, param.grad.numpy()))

    def wait(self, model):
        MPI.Request.Waitall(self.requests)
        self.requests.clear()
        for param in model.parameters():
            param.grad.div_(self.world.size)


def start_gloo(world):
    port = None
    if world.rank == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    port = world.bcast(port, root=0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=world.rank,
                            world_size=world.size)


def main():
    path, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10
    shapes = read_shapes(path)
    world = MPI.COMM_WORLD
    start_gloo(world)
    x = torch.tensor(1.0 + world.rank)
    with ddp.init() as comm:
        plain = Parameters(shapes)
        ours = ddp.torch.DistributedDataParallel(Parameters(shapes))
        horovod_model = Parameters(shapes)
        horovod = ddp.torch.DistributedOptimizer(torch.optim.SGD(horovod_model.parameters(), lr=0),
                                                 horovod_model.named_parameters())
        theirs = torch.nn.parallel.DistributedDataParallel(Parameters(shapes))
        hooked_model = Parameters(shapes)
        hooked = HookedIallreduce(hooked_model, world)

        def step(model, finish=None):
            for param in model.parameters():  # zeroed in place, as zero_grad(set_to_none=False)
                if param.grad is not None:
                    param.grad.zero_()
            model(x).backward()
            if finish is not None:
                finish()

        strategies = {
            "no communication": lambda: step(plain),
            "ddp.torch DDP": lambda: step(ours),
            "ddp.torch DistributedOptimizer": lambda: step(horovod_model, horovod.synchronize),
            "torch DDP (gloo)": lambda: step(theirs),
            "mpi4py Iallreduce from hooks": lambda: step(hooked_model,
                                                         lambda: hooked.wait(hooked_model)),
        }
        times = time_interleaved(strategies, runs)
        expected = float(np.mean([1.0 + rank for rank in range(world.size)]))
        for model in (ours.module, horovod_model, theirs.module, hooked_model):
            assert all(torch.all(p.grad == expected) for p in model.parameters()), "not averaged"
    dist.destroy_process_group()
    if world.rank == 0:
        megabytes = sum(int(np.prod(shape)) for shape in shapes) * 4 / 1e6
        baseline = np.median(times["no communication"])
        reference = np.median(times["ddp.torch DDP"]) - baseline
        print(f"{path.rsplit('/', 1)[-1]}: {len(shapes)} tensors, {megabytes:.1f} MB, "
              f"{world.size} ranks, {torch.get_num_threads()} torch threads, median of {runs}")
        print(f"{'strategy':32s} {'step ms':>9s} {'min':>8s} {'max':>8s} {'comm ms':>8s} "
              f"{'comm ratio to ddp.torch DDP':>28s}")
        for name, samples in times.items():
            median = np.median(samples)
            communication = median - baseline
            ratio = f"{communication / reference:28.2f}" if name != "no communication" else ""
            print(f"{name:32s} {median * 1e3:9.2f} {min(samples) * 1e3:8.2f} "
                  f"{max(samples) * 1e3:8.2f} {communication * 1e3:8.2f} {ratio}")


if __name__ == "__main__":
    main()
