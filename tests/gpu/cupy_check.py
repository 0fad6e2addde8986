"""CuPy arrays through the Python package on a GPU, run by scripts/gpu-proof
(alone, or under mpirun): every rank allreduces, broadcasts and checks CuPy
arrays on a stream of its own, blocking and async, and compares with the
values computed on the host. Exits non-zero on any difference."""
import sys

import cupy
import numpy as np

import ddp


def main():
    comm = ddp.init()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        grads = [cupy.full(n, comm.rank + 1, dtype) for n, dtype in
                 [(1000, cupy.float32), (7, cupy.float16), (1 << 20, cupy.float64)]]
    comm.allreduce(grads, op="avg", stream=stream)
    want = sum(r + 1 for r in range(comm.size)) / comm.size
    stream.synchronize()
    for g in grads:
        assert np.all(cupy.asnumpy(g) == want), (g.dtype, cupy.asnumpy(g)[:4], want)

    with stream:
        params = cupy.arange(4096, dtype=cupy.float32) * (comm.rank + 1)
    comm.broadcast(params, root=0, stream=stream)
    assert comm.check_replicas(params, stream=stream), "replicas differ after broadcast"

    with stream:
        more = cupy.ones(1 << 16, cupy.float32) * comm.rank
    request = comm.allreduce_async(more, op="sum", stream=stream)
    request.wait_on(stream)  # later work on `stream` sees the sum without the host waiting
    with stream:
        total = float(more.sum())
    request.wait()
    assert total == (1 << 16) * sum(range(comm.size)), total
    comm.log(f"CuPy on {comm.backend}, cuda:{comm.device}: allreduce, broadcast, async all match")
    comm.finalize()


if __name__ == "__main__":
    sys.exit(main())
