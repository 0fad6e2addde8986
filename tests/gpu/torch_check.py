"""PyTorch CUDA tensors through the Python package on a GPU, run by
scripts/gpu-proof (under mpirun): every rank allreduces, reduce-scatters,
allgathers, exchanges (alltoall) and broadcasts torch tensors on a stream of its own, blocking and
async, and compares with the values computed on the host. Exits non-zero on
any difference."""
import sys

import torch

import ddp


def main():
    comm = ddp.init()
    device = torch.device("cuda", comm.device)
    stream = torch.cuda.Stream(device=device)
    with torch.cuda.stream(stream):
        grads = [torch.full((n,), comm.rank + 1, dtype=dtype, device=device) for n, dtype in
                 [(1000, torch.float32), (7, torch.bfloat16), (1 << 20, torch.float64)]]
    comm.allreduce(grads, op="avg", stream=stream)
    want = sum(r + 1 for r in range(comm.size)) / comm.size
    stream.synchronize()
    for g in grads:
        assert torch.all(g.cpu().double() == want), (g.dtype, g[:4], want)

    with torch.cuda.stream(stream):
        rows = torch.arange(4 * comm.size, dtype=torch.float32, device=device) * (comm.rank + 1)
        mine = torch.empty(4, dtype=torch.float32, device=device)
    comm.reduce_scatter(rows, op="sum", out=mine, stream=stream)
    stream.synchronize()
    factor = sum(r + 1 for r in range(comm.size))
    expect = torch.arange(4 * comm.rank, 4 * comm.rank + 4, dtype=torch.float32) * factor
    assert torch.equal(mine.cpu(), expect), (mine, expect)

    with torch.cuda.stream(stream):
        gathered = torch.empty(4 * comm.size, dtype=torch.float32, device=device)
    comm.allgather(mine, out=gathered, stream=stream)
    stream.synchronize()
    assert torch.equal(gathered.cpu(), torch.arange(4 * comm.size, dtype=torch.float32) * factor), gathered

    # alltoall: block j of each rank's tokens to rank j (ncclSend/ncclRecv on nccl).
    with torch.cuda.stream(stream):
        tokens = torch.arange(3 * comm.size, dtype=torch.float32, device=device) + 100 * comm.rank
        routed = torch.empty_like(tokens)
    comm.alltoall(tokens, out=routed, stream=stream)
    stream.synchronize()
    expect = torch.cat([torch.arange(3 * comm.rank, 3 * comm.rank + 3, dtype=torch.float32) + 100 * r
                        for r in range(comm.size)])
    assert torch.equal(routed.cpu(), expect), (routed, expect)

    with torch.cuda.stream(stream):
        params = torch.arange(4096, dtype=torch.float16, device=device) * (comm.rank + 1)
    comm.broadcast(params, root=0, stream=stream)
    assert comm.check_replicas(params, stream=stream), "replicas differ after broadcast"

    with torch.cuda.stream(stream):
        more = torch.ones(1 << 16, dtype=torch.float32, device=device) * comm.rank
    request = comm.allreduce_async(more, op="sum", stream=stream)
    request.wait_on(stream)  # later work on `stream` sees the sum without the host waiting
    with torch.cuda.stream(stream):
        total = more.sum()
    request.wait()
    assert float(total) == (1 << 16) * sum(range(comm.size)), float(total)
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
    comm.log(f"torch on {comm.backend}, cuda:{comm.device} (torch's NCCL: {nccl}): allreduce, reduce_scatter, "
             "allgather, alltoall, broadcast, async all match")
    comm.finalize()


if __name__ == "__main__":
    sys.exit(main())
