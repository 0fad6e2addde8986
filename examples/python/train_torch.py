"""Data-parallel training of a small PyTorch model with libddp, written as a
torch DDP user writes it.

    mpirun -np 2 .venv/bin/python examples/python/train_torch.py   (as root: mpirun --allow-run-as-root)

ddp.torch.DistributedDataParallel starts every rank from rank 0's
parameters and averages the gradients inside loss.backward(): they live in
libddp's buckets, each bucket on its way while backward still computes the
layers before it. Each rank takes its share of a synthetic regression set
through a ShardedSampler (torch's DistributedSampler); rank 0 prints the
mean loss over all ranks per epoch, and the run ends by checking that every
rank holds bitwise the same parameters. `--horovod` trains the same model
with ddp.torch.DistributedOptimizer instead, as a Horovod user would.
"""
import sys

import torch

import ddp
import ddp.torch

N_ITEMS, N_FEATURES, HIDDEN = 4096, 8, 32
EPOCHS, BATCH, LEARNING_RATE = 10, 64, 0.05


def synthetic_data():
    """The same data set on every rank: y = a fixed random network of x, plus noise."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(N_ITEMS, N_FEATURES, generator=generator)
    teacher = torch.randn(N_FEATURES, 1, generator=generator)
    y = torch.tanh(x @ teacher) + 0.05 * torch.randn(N_ITEMS, 1, generator=generator)
    return x, y


def main():
    horovod = "--horovod" in sys.argv[1:]
    x, y = synthetic_data()
    comm = ddp.init()
    torch.manual_seed(comm.rank)  # different starts on purpose: rank 0's wins
    model = torch.nn.Sequential(torch.nn.Linear(N_FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, 1))
    if horovod:
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
        optimizer = ddp.torch.DistributedOptimizer(optimizer, model.named_parameters())
        ddp.torch.broadcast_parameters(model.state_dict(), root=0)
        ddp.torch.broadcast_optimizer_state(optimizer, root=0)
    else:
        model = ddp.torch.DistributedDataParallel(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    sampler = ddp.ShardedSampler(N_ITEMS, seed=1)
    if comm.rank == 0:
        way = "DistributedOptimizer" if horovod else "DistributedDataParallel"
        print(f"{comm.size} ranks ({comm.backend}), {way}, {len(sampler)} items each", flush=True)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        order = torch.from_numpy(sampler.indices())
        epoch_loss = 0.0
        for start in range(0, len(order), BATCH):
            batch = order[start:start + BATCH]
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
            loss.backward()  # DistributedDataParallel: averaged when this returns
            optimizer.step()  # DistributedOptimizer: averaged here, then the step
            epoch_loss += loss.item() * len(batch)
        mean_loss = comm.allreduce(epoch_loss / len(order), op=ddp.Op.AVG)
        if comm.rank == 0:
            print(f"epoch {epoch + 1:2d}/{EPOCHS}  loss {mean_loss:.5f}", flush=True)
    check = comm.check_replicas(model.parameters())
    if comm.rank == 0:
        print("replicas identical" if check else f"replicas differ: {check.message}", flush=True)
    return 0 if check else 1


if __name__ == "__main__":
    sys.exit(main())
