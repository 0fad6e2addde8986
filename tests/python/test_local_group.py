"""ddp.init_local: several ranks in one process, one thread each (issue 32).
Real threads, real NumPy arrays, the GIL released inside every call. Run
without mpirun."""
import threading

import numpy as np
import pytest

import ddp


def run_ranks(comms, body):
    """body(rank, comm) on a thread per rank; returns what each returned or raised."""
    results = [None] * len(comms)

    def run(rank):
        try:
            results[rank] = body(rank, comms[rank])
        except Exception as error:  # noqa: BLE001 (handed to the test)
            results[rank] = error
        finally:
            comms[rank].finalize()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(comms))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a rank's thread is still inside libddp"
    return results


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_threads_allreduce_broadcast_and_allgather_numpy_arrays(n):
    comms = ddp.init_local(n)
    assert [(c.rank, c.size, c.backend) for c in comms] == [(r, n, "local") for r in range(n)]

    def body(rank, comm):
        grads = [np.full(1000, rank + 1, np.float32), np.arange(70000, dtype=np.float64) * rank]
        comm.allreduce(grads, op="avg")
        params = np.full(5000, float(rank), np.float32)
        comm.broadcast(params, root=n - 1)
        gathered = comm.allgather(np.full(3, rank, np.int32))
        return grads, params, gathered

    for result in run_ranks(comms, body):
        assert not isinstance(result, Exception), result
        grads, params, gathered = result
        assert np.all(grads[0] == (n + 1) / 2)
        np.testing.assert_allclose(grads[1], np.arange(70000) * (n - 1) / 2)
        assert np.all(params == n - 1)
        assert np.array_equal(np.asarray(gathered).reshape(-1), np.repeat(np.arange(n, dtype=np.int32), 3))


def test_a_thread_passing_another_list_raises_mismatch_on_every_rank():
    comms = ddp.init_local(3)

    def body(rank, comm):
        tensors = [np.ones(10, np.float32), np.ones(20, np.float32)]
        comm.allreduce(tensors[:1] if rank == 1 else tensors)

    for result in run_ranks(comms, body):
        assert isinstance(result, ddp.MismatchError), result
        assert "rank 1" in str(result)


def test_a_thread_that_never_calls_is_named_in_its_peers_timeout():
    comms = ddp.init_local(2, timeout=1)
    done = threading.Event()

    def body(rank, comm):
        if rank == 1:
            done.wait(10)  # computes until rank 0 has given up
            return None
        try:
            comm.allreduce(np.ones(100, np.float32))
        finally:
            done.set()

    results = run_ranks(comms, body)
    assert isinstance(results[0], ddp.TimeoutError), results[0]
    assert "rank 1 has not joined" in str(results[0])


def test_bad_arguments_raise_naming_them():
    with pytest.raises(ddp.InvalidArgumentError, match="n is 0"):
        ddp.init_local(0)
    with pytest.raises(TypeError, match="n: expected an int"):
        ddp.init_local(2.0)
    with pytest.raises(ddp.InvalidArgumentError):
        ddp.init_local(2, timeout=-1)
    with pytest.raises(ValueError, match="one CUDA device id per rank"):
        ddp.init_local(2, devices=[0])
    with pytest.raises(ddp.InvalidArgumentError, match=r"devices\[1\] is -1"):
        ddp.init_local(2, devices=[0, -1])


def test_devices_where_no_gpu_can_run_nccl_raise_saying_why():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is here: scripts/gpu-proof runs the device group")
    except Exception:  # noqa: BLE001 (no CuPy, or no driver: no GPU)
        pass
    with pytest.raises(ddp.UnsupportedError, match="GPU|NCCL|nccl|CUDA"):
        ddp.init_local(2, devices=[0, 0])


def test_ranks_left_unfinalized_end_together_at_exit(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "left.py"
    script.write_text("import numpy as np, ddp\n"
                      "comms = ddp.init_local(3)\n"
                      "print('started', [c.rank for c in comms])\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "started [0, 1, 2]" in result.stdout


def test_threads_split_into_sub_groups_that_reduce_apart():
    comms = ddp.init_local(4)

    def body(rank, comm):
        # Even and odd ranks apart, ranked backwards; rank 2 joins none.
        sub = comm.split(None if rank == 2 else rank % 2, key=-rank)
        if sub is None:
            return None
        with sub:
            return sub.rank, sub.size, sub.allreduce(np.full(1000, rank, np.int64))

    results = run_ranks(comms, body)
    assert results[2] is None
    for rank, expected in [(0, (0, 1, 0)), (1, (1, 2, 4)), (3, (0, 2, 4))]:
        sub_rank, sub_size, summed = results[rank]
        assert (sub_rank, sub_size, int(summed[0])) == expected, results[rank]
        assert np.all(summed == expected[2])


def test_a_bad_split_color_on_one_thread_fails_its_peers_at_once():
    import time
    comms = ddp.init_local(3, timeout=60)
    started = time.monotonic()
    results = run_ranks(comms, lambda rank, comm: comm.split(-5 if rank == 1 else 0))
    assert time.monotonic() - started < 30
    assert isinstance(results[1], ddp.InvalidArgumentError), results[1]
    assert "color is -5" in str(results[1])
    for rank in (0, 2):
        assert isinstance(results[rank], ddp.MismatchError), results[rank]
        assert "rank 1" in str(results[rank])


def test_one_thread_drives_every_rank_in_a_group():
    n = 3
    comms = ddp.init_local(n)
    replicas = [[np.full(1000, rank + 1, np.float32), np.arange(5, dtype=np.float64) * rank]
                for rank in range(n)]
    for _ in range(2):
        with ddp.group():
            results = [comm.allreduce(grads, op="avg") for comm, grads in zip(comms, replicas)]
            assert all(isinstance(result, ddp.Grouped) and not result.done() for result in results)
            with pytest.raises(RuntimeError, match="after the block"):
                results[0].wait()
    for result, grads in zip(results, replicas):
        assert result.wait() is grads  # written in place
        assert np.all(grads[0] == (n + 1) / 2)
    # Numbers and new arrays come back through wait(); groups nest.
    with ddp.group():
        with ddp.group():
            losses = [comm.allreduce(float(rank), op="avg") for rank, comm in enumerate(comms)]
        gathered = [comm.allgather(np.full(2, rank, np.int32)) for rank, comm in enumerate(comms)]
        for comm in comms:
            comm.barrier()
    assert [loss.wait() for loss in losses] == [1.0] * n
    for result in gathered:
        assert np.array_equal(result.wait(), np.repeat(np.arange(n, dtype=np.int32), 2))
    for comm in comms:
        comm.finalize()


def test_calls_that_answer_at_once_are_refused_inside_a_group():
    comms = ddp.init_local(2)
    with ddp.group():
        for call in (lambda: comms[0].check_replicas(np.ones(3)),
                     lambda: comms[0].sync_optimizer_state({"step": 1}),
                     lambda: comms[0].reducer([np.ones(3)]),
                     lambda: comms[0].split(0),
                     lambda: comms[0].allreduce_async(np.ones(3)),
                     lambda: comms[0].allgather_async(np.ones(3)),
                     lambda: comms[0].finalize()):
            with pytest.raises(ddp.InvalidArgumentError, match=r"cannot run inside ddp.group\(\)"):
                call()
    # Nothing was issued, so nothing was broken: the ranks still reduce together.
    with ddp.group():
        sums = [comm.allreduce(np.ones(2)) for comm in comms]
    assert all(np.all(result.wait() == 2) for result in sums)
    for comm in comms:
        comm.finalize()


def test_an_exception_leaving_an_inner_group_ends_the_calls_at_once():
    import time
    comms = ddp.init_local(2, timeout=60)
    started = time.monotonic()
    with pytest.raises(ddp.TimeoutError, match="an exception left ddp.group"):
        with ddp.group():
            try:
                with ddp.group():
                    first = comms[0].allreduce(np.ones(10))
                    raise KeyError("the program's own")
            except KeyError:
                pass  # caught between the blocks: rank 1's call is never issued
    assert time.monotonic() - started < 30
    with pytest.raises(ddp.DDPError):
        first.wait()
    for comm in comms:
        comm.finalize()


def test_an_exception_leaving_a_group_ends_it_at_once():
    import time
    comms = ddp.init_local(2, timeout=60)
    started = time.monotonic()
    grads = [np.ones(100, np.float32), np.ones(100, np.float32)]
    with pytest.raises(ValueError, match="op 'median'"):
        with ddp.group():
            first = comms[0].allreduce(grads[0])
            comms[1].allreduce(grads[1], op="median")  # refused: the loop never finishes
    assert time.monotonic() - started < 30
    assert first.done()
    with pytest.raises(ddp.DDPError):
        first.wait()
    for comm in comms:
        comm.finalize()
