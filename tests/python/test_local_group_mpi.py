"""ddp.init_local under mpirun: each process's threads are ranks of one
group across the processes (rank = process x n + thread). Run under
`mpirun -np 2` and `-np 3` (scripts/run-python-tests); real threads, real
NumPy arrays, real MPI between the processes."""
import os
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

import ddp

pytestmark = pytest.mark.skipif("OMPI_COMM_WORLD_SIZE" not in os.environ,
                                reason="needs mpirun (scripts/run-python-tests)")

PROCESS, PROCESSES = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size


def run_ranks(comms, body):
    """body(comm) on a thread per rank; returns what each returned or raised."""
    results = [None] * len(comms)

    def run(i):
        try:
            results[i] = body(comms[i])
        except Exception as error:  # noqa: BLE001 (handed to the test)
            results[i] = error
        finally:
            comms[i].finalize()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(comms))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a rank's thread is still inside libddp"
    return results


@pytest.mark.parametrize("n", [1, 2])
def test_threads_of_every_process_make_one_group(n):
    comms = ddp.init_local(n, timeout=60)
    size = PROCESSES * n
    assert [(c.rank, c.size) for c in comms] == [(PROCESS * n + i, size) for i in range(n)]

    def body(comm):
        grads = [np.full(1000, comm.rank + 1, np.float32), np.arange(70000, dtype=np.float64) * comm.rank]
        comm.allreduce(grads, op="avg")
        params = np.full(5000, float(comm.rank), np.float32)
        comm.broadcast(params, root=size - 1)
        gathered = comm.allgather(np.full(3, comm.rank, np.int32))
        # Row j, to rank j, says who sent it and to whom.
        tokens = np.array([[comm.rank * 100 + to] * 4 for to in range(size)], np.int64)
        exchanged = comm.alltoall(tokens)
        return grads, params, gathered, (comm.rank, exchanged)

    for result in run_ranks(comms, body):
        assert not isinstance(result, Exception), result
        grads, params, gathered, (rank, exchanged) = result
        assert np.all(grads[0] == (size + 1) / 2)
        np.testing.assert_allclose(grads[1], np.arange(70000) * (size - 1) / 2)
        assert np.all(params == size - 1)
        assert np.array_equal(np.asarray(gathered).reshape(-1), np.repeat(np.arange(size, dtype=np.int32), 3))
        assert np.array_equal(exchanged, np.array([[sender * 100 + rank] * 4 for sender in range(size)]))


def test_a_bad_root_on_one_thread_of_one_process_fails_every_rank_at_once():
    comms = ddp.init_local(2, timeout=60)

    def body(comm):
        started = time.monotonic()
        try:
            comm.broadcast(np.zeros(10, np.float32), root=99 if comm.rank == 1 else 0)
        finally:
            body.seconds[comm.rank % 2] = time.monotonic() - started

    body.seconds = [0.0, 0.0]
    results = run_ranks(comms, body)
    for i, result in enumerate(results):
        assert isinstance(result, ddp.DDPError), result
        assert "rank 1" in str(result), result
        assert body.seconds[i] < 20, "the peers must not wait for the 60 s timeout"


@pytest.mark.skipif(PROCESSES < 2, reason="one process cannot interleave processes")
def test_threads_split_into_groups_of_processes_times_threads():
    comms = ddp.init_local(2, timeout=60)

    def body(comm):
        thread, process = comm.rank % 2, comm.rank // 2
        # A group per thread number, across the processes; then one that
        # interleaves the processes by key, which such groups cannot be.
        with comm.split(thread, key=comm.rank) as sub:
            summed = sub.allreduce(np.full(100, comm.rank, np.int64))
            placed = (sub.rank, sub.size, int(summed[0]))
        with pytest.raises(ddp.UnsupportedError, match="color 0"):
            comm.split(0, key=thread * 100 + process)
        return placed

    for thread, result in enumerate(run_ranks(comms, body)):
        assert not isinstance(result, Exception), result
        assert result == (PROCESS, PROCESSES, sum(p * 2 + thread for p in range(PROCESSES)))


def test_devices_without_a_gpu_fail_every_process_saying_why():
    """With devices each rank sets up NCCL on its process's GPU; without a
    GPU (CI's machines) every process raises at once, saying why."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is here: scripts/gpu-proof runs the device group")
    except Exception:  # noqa: BLE001 (no CuPy, or no driver: no GPU)
        pass
    started = time.monotonic()
    try:
        comms = ddp.init_local(2, devices=[0, 0])
    except ddp.UnsupportedError as error:
        assert any(word in str(error) for word in ("GPU", "NCCL", "nccl", "CUDA")), error
        assert time.monotonic() - started < 20
    else:  # a GPU and NCCL here after all
        for comm in comms:
            comm.finalize()
        pytest.skip("a GPU runs NCCL here: scripts/gpu-proof runs the device group")
