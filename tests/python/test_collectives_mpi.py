"""The Python API across real MPI ranks: run under `mpirun -np 2` and `-np 3`
(scripts/run-python-tests). mpi4py computes the references independently."""
import os

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from mpi4py import MPI

import ddp

pytestmark = pytest.mark.skipif("OMPI_COMM_WORLD_SIZE" not in os.environ,
                                reason="needs mpirun (scripts/run-python-tests)")

WORLD = MPI.COMM_WORLD
DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.float16, np.float32, np.float64,
          ml_dtypes.bfloat16]


@pytest.fixture(scope="module")
def comm():
    with ddp.init(timeout=60) as world:
        yield world


def rank_values(dtype, count, rank):
    """Small values that every dtype holds exactly, different on every rank."""
    return ((np.arange(count) + 3 * rank) % 5 + 1).astype(dtype)


def reference(op, dtype, count):
    stacked = np.stack([rank_values(np.float64, count, r) for r in range(WORLD.size)])
    result = {"sum": stacked.sum(0), "avg": stacked.mean(0), "min": stacked.min(0),
              "max": stacked.max(0), "prod": stacked.prod(0)}[op]
    return result.astype(dtype)


def test_queries_agree_with_mpi(comm):
    assert (comm.rank, comm.size, comm.backend) == (WORLD.rank, WORLD.size, "mpi")
    assert comm.local_size == WORLD.size and 0 <= comm.local_rank < comm.local_size


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["sum", "avg", "min", "max", "prod"])
def test_allreduce_every_dtype_and_op(comm, dtype, op):
    if op == "avg" and not np.issubdtype(np.dtype(dtype), np.floating) and \
            np.dtype(dtype) != ml_dtypes.bfloat16:
        with pytest.raises(ddp.InvalidArgumentError, match="AVG needs floating"):
            comm.allreduce([rank_values(dtype, 3, comm.rank)], op=op)
        return
    tensors = [rank_values(dtype, count, comm.rank) for count in (1, 7, 0, 1000, 20000)]
    comm.allreduce(tensors, op=op)
    for tensor, count in zip(tensors, (1, 7, 0, 1000, 20000)):
        np.testing.assert_array_equal(tensor.astype(np.float64),
                                      reference(op, dtype, count).astype(np.float64))


@pytest.mark.parametrize("fusion_bytes", [-1, 4096, None])
def test_allreduce_with_and_without_fusion(comm, fusion_bytes):
    tensors = [rank_values(np.float32, n, comm.rank) for n in (3, 100, 5000, 70000)]
    comm.allreduce(tensors, op="sum", fusion_bytes=fusion_bytes)
    for tensor, n in zip(tensors, (3, 100, 5000, 70000)):
        np.testing.assert_array_equal(tensor, reference("sum", np.float32, n))


def test_allreduce_async_overlaps_and_waits(comm):
    gradients = [rank_values(np.float32, n, comm.rank) for n in (10, 200000)]
    request = comm.allreduce_async(gradients, op="sum")
    busy = np.ones((64, 64)) @ np.ones((64, 64))  # host work while it runs
    while not request.done():
        pass
    assert request.wait() is gradients and busy[0, 0] == 64
    np.testing.assert_array_equal(gradients[1], reference("sum", np.float32, 200000))


def test_allreduce_async_of_mismatched_lists_raises_at_wait(comm):
    request = comm.allreduce_async([np.ones(3 + comm.rank, dtype=np.float32)])
    with pytest.raises(ddp.MismatchError):
        request.wait()


def test_allreduce_defaults_to_sum_and_allreduce_gradients_averages(comm):
    summed = comm.allreduce([rank_values(np.float32, 6, comm.rank)])
    np.testing.assert_array_equal(summed[0], reference("sum", np.float32, 6))
    averaged = comm.allreduce_gradients([rank_values(np.float64, 6, comm.rank)])
    np.testing.assert_allclose(averaged[0], reference("avg", np.float64, 6))


def test_numbers_are_reduced_and_returned_as_numbers(comm):
    loss = float(comm.rank + 1)
    mean = comm.allreduce(loss, op="avg")
    assert type(mean) is float and mean == pytest.approx(WORLD.allreduce(loss) / comm.size)
    steps = comm.allreduce(comm.rank, op="max")
    assert type(steps) is int and steps == comm.size - 1
    metric = comm.allreduce(np.float32(0.5))
    assert type(metric) is np.float32 and metric == np.float32(0.5 * comm.size)


def test_jax_arrays_and_trees_through_the_returning_api(comm):
    params = {"dense": {"w": jnp.full((2, 3), float(comm.rank)), "b": jnp.zeros(3)},
              "scale": (np.full(2, comm.rank, np.float32), 1.0 + comm.rank),
              "step": comm.rank}
    synced = comm.broadcast(params, root=comm.size - 1)
    root = comm.size - 1
    assert isinstance(synced["dense"]["w"], jnp.ndarray) and synced is not params
    np.testing.assert_array_equal(np.asarray(synced["dense"]["w"]), root)
    assert synced["scale"][0] is params["scale"][0] and (params["scale"][0] == root).all()
    assert synced["scale"][1] == 1.0 + root and synced["step"] == root
    np.testing.assert_array_equal(np.asarray(params["dense"]["w"]), comm.rank)  # immutable
    grads = {"w": jnp.asarray(rank_values(np.float32, 5, comm.rank)), "loss": 0.25}
    reduced = comm.allreduce_gradients(grads)
    np.testing.assert_allclose(np.asarray(reduced["w"]), reference("avg", np.float32, 5))
    assert reduced["loss"] == pytest.approx(0.25)


def test_async_allreduce_of_a_tree_returns_it_at_wait(comm):
    request = comm.allreduce_async({"w": jnp.ones(4), "n": 1})
    result = request.wait()
    np.testing.assert_array_equal(np.asarray(result["w"]), comm.size)
    assert result["n"] == comm.size


def test_broadcast_from_every_root(comm):
    for root in range(comm.size):
        params = [np.full(5, comm.rank, dtype=np.float64), np.full((2, 2), comm.rank, np.int32)]
        comm.broadcast(params, root=root)
        assert (params[0] == root).all() and (params[1] == root).all()


def test_reduce_to_the_last_rank(comm):
    root = comm.size - 1
    values = rank_values(np.int64, 10, comm.rank)
    original = values.copy()
    comm.reduce([values], op="sum", root=root)
    expected = reference("sum", np.int64, 10) if comm.rank == root else original
    np.testing.assert_array_equal(values, expected)


def test_sync_optimizer_state_of_nested_structure(comm):
    state = {"state": {0: {"exp_avg": np.full(4, comm.rank, np.float32), "step": comm.rank + 1},
                       1: {"exp_avg": np.full(2, comm.rank, np.float64), "step": comm.rank}},
             "param_groups": [{"lr": 0.1 * (comm.rank + 1), "betas": (0.9, 0.999 - comm.rank)}]}
    synced = comm.sync_optimizer_state(state, root=0)
    assert (state["state"][0]["exp_avg"] == 0).all() and (state["state"][1]["exp_avg"] == 0).all()
    assert synced["state"][0]["step"] == 1 and synced["state"][1]["step"] == 0
    assert synced["param_groups"][0]["lr"] == pytest.approx(0.1)
    assert synced["param_groups"][0]["betas"] == (0.9, 0.999)
    assert synced["state"][0]["exp_avg"] is state["state"][0]["exp_avg"]


def test_sync_optimizer_state_with_different_structure_raises_on_every_rank(comm):
    state = {"m": np.zeros(4 if comm.rank == 0 else 5, np.float32), "step": 3}
    with pytest.raises(ddp.MismatchError, match=r"state\['m'\] is float32 of shape \(4,\) on "
                                                r"rank 0 but float32 of shape \(5,\) on rank 1"):
        comm.sync_optimizer_state(state)


def test_mismatched_lists_raise_on_every_rank_naming_the_tensor(comm):
    tensors = [np.ones(4, np.float32), np.ones(4 if comm.rank == 0 else 6, np.float32)]
    with pytest.raises(ddp.MismatchError) as caught:
        comm.allreduce(tensors)
    assert caught.value.status_name == "DDP_ERR_MISMATCH"
    assert "tensor" in caught.value.message and "rank" in caught.value.message
    comm.allreduce([np.ones(2, np.float32)])  # still usable


def test_a_rank_with_bad_arguments_makes_peers_raise_mismatch(comm):
    if comm.rank == 0:
        with pytest.raises(ddp.InvalidArgumentError):
            comm.allreduce([np.ones(2, np.int32)], op="avg")
    else:
        with pytest.raises(ddp.MismatchError):
            comm.allreduce([np.ones(2, np.int32)], op="sum")


def test_check_replicas_names_the_differing_tensor(comm):
    same = [np.arange(4.0), np.ones(3)]
    assert comm.check_replicas(same)
    different = [np.arange(4.0), np.full(3, 1.0 if comm.rank == 0 else 2.0)]
    result = comm.check_replicas(different)
    assert not result and "tensors[1] (f64[3]) differs" in result.message


def test_check_replicas_of_jax_arrays_through_dlpack(comm):
    assert comm.check_replicas([jnp.arange(16, dtype=jnp.float32)])
    assert not comm.check_replicas([jnp.full(3, comm.rank, dtype=jnp.int32)])


def test_barrier_and_log(comm, caplog):
    comm.barrier()
    with caplog.at_level("INFO", logger="ddp"):
        comm.log("step done")
    assert any(r.getMessage().startswith(f"[ddp {comm.rank}/{comm.size} ")
               for r in caplog.records)


def test_sampler_shards_are_disjoint_and_cover_the_data_set(comm):
    for drop_last in (False, True):
        sampler = ddp.ShardedSampler(11, shuffle=True, seed=3, drop_last=drop_last)
        sampler.set_epoch(2)
        mine = list(sampler)
        everyone = WORLD.allgather(mine)
        assert len({len(shard) for shard in everyone}) == 1
        flat = sum(everyone, [])
        if drop_last:
            assert len(set(flat)) == len(flat) == (11 // comm.size) * comm.size
        else:
            assert set(flat) == set(range(11))


def test_reducer_averages_gradients_marked_in_any_order(comm):
    like = [np.zeros((4, 3), np.float32), np.zeros(70000, np.float32), np.zeros(5, np.float64)]
    rng = np.random.default_rng(comm.rank)
    with comm.reducer(like, op="avg", fusion_bytes=4096) as reducer:
        for step in range(3):
            for index in rng.permutation(len(like)):  # a different order on every rank
                reducer.gradients[index][...] = (comm.rank + 1) * (step + 1) + index
                reducer.mark_ready(int(index))
            reducer.wait()
            mean_rank = (comm.size + 1) / 2
            for index, gradient in enumerate(reducer.gradients):
                assert gradient.shape == like[index].shape and gradient.dtype == like[index].dtype
                np.testing.assert_allclose(gradient, mean_rank * (step + 1) + index, rtol=1e-6)


def test_reducer_step_with_a_gradient_missing_on_one_rank_raises_everywhere(comm):
    like = [np.zeros(8, np.float32), np.zeros(8, np.float32)]
    with comm.reducer(like) as reducer:
        for index in range(len(like)):
            if comm.rank == comm.size - 1 and index == 1:
                continue
            reducer.mark_ready(index)
        with pytest.raises(ddp.MismatchError, match="marked gradient 1 ready but rank"):
            reducer.wait()


# A bad argument on one rank (the last): that rank raises the Python
# exception naming the argument by its tree path, and still takes part in
# the collective, so that its peers raise MismatchError naming the rank and
# the reason instead of waiting (they would raise TimeoutError after 20 s).
PEER_TIMEOUT = 20


def _non_contiguous():
    return {"layer1": np.ones(4, np.float32), "layer2": {"bias": np.ones(8, np.float32)[::2]}}


def _good_tree():
    return {"layer1": np.ones(4, np.float32), "layer2": {"bias": np.ones(4, np.float32)}}


def _read_only():
    tree = _good_tree()
    tree["layer2"]["bias"].flags.writeable = False
    return tree


def _wrong_dtype():
    tree = _good_tree()
    tree["layer2"]["bias"] = tree["layer2"]["bias"].astype(np.complex64)
    return tree


BAD_CALLS = {
    # name: (collective in the peers' message, call with bad arguments, good call, error, words)
    "allreduce non-contiguous": (
        "allreduce", lambda c: c.allreduce(_non_contiguous(), timeout=PEER_TIMEOUT),
        lambda c: c.allreduce(_good_tree(), timeout=PEER_TIMEOUT),
        ValueError, "tensors['layer2']['bias']: the array is not contiguous"),
    "allreduce wrong dtype": (
        "allreduce", lambda c: c.allreduce(_wrong_dtype(), timeout=PEER_TIMEOUT),
        lambda c: c.allreduce(_good_tree(), timeout=PEER_TIMEOUT),
        ValueError, "tensors['layer2']['bias']: dtype complex64 is not one libddp reduces"),
    "allreduce unknown op": (
        "allreduce", lambda c: c.allreduce(_good_tree(), op="median", timeout=PEER_TIMEOUT),
        lambda c: c.allreduce(_good_tree(), timeout=PEER_TIMEOUT),
        ValueError, "op 'median'"),
    "allreduce_async read-only": (
        "allreduce", lambda c: c.allreduce_async(_read_only(), timeout=PEER_TIMEOUT).wait(),
        lambda c: c.allreduce_async(_good_tree(), timeout=PEER_TIMEOUT).wait(),
        ValueError, "tensors['layer2']['bias']: the array is read-only"),
    "broadcast read-only": (
        "broadcast", lambda c: c.broadcast(_read_only(), timeout=PEER_TIMEOUT),
        lambda c: c.broadcast(_good_tree(), timeout=PEER_TIMEOUT),
        ValueError, "tensors['layer2']['bias']: the array is read-only"),
    "broadcast root not an int": (
        "broadcast", lambda c: c.broadcast(_good_tree(), root="0", timeout=PEER_TIMEOUT),
        lambda c: c.broadcast(_good_tree(), timeout=PEER_TIMEOUT),
        TypeError, "root '0'"),
    "reduce not an array": (
        "reduce", lambda c: c.reduce({"w": object()}, timeout=PEER_TIMEOUT),
        lambda c: c.reduce({"w": np.ones(2)}, timeout=PEER_TIMEOUT),
        TypeError, "tensors['w']: expected an array"),
    "sync_optimizer_state unknown leaf": (
        "sync_optimizer_state",
        lambda c: c.sync_optimizer_state({"m": np.ones(2), "schedule": {1, 2}}, timeout=PEER_TIMEOUT),
        lambda c: c.sync_optimizer_state({"m": np.ones(2), "schedule": "cosine"}, timeout=PEER_TIMEOUT),
        TypeError, "state['schedule']: cannot synchronize a set"),
    "sync_optimizer_state non-contiguous": (
        "sync_optimizer_state",
        lambda c: c.sync_optimizer_state({"m": np.ones((4, 4))[:, 1], "step": 3}, timeout=PEER_TIMEOUT),
        lambda c: c.sync_optimizer_state({"m": np.ones(4), "step": 3}, timeout=PEER_TIMEOUT),
        ValueError, "state['m']: the array is not contiguous"),
    "check_replicas not an array": (
        "check_replicas", lambda c: c.check_replicas([np.ones(3), "text"], timeout=PEER_TIMEOUT),
        lambda c: c.check_replicas([np.ones(3), np.ones(1)], timeout=PEER_TIMEOUT),
        TypeError, "tensors[1]: expected an array"),
    # A timeout's value is libddp's to check, as for C (a finite number >= 0,
    # 0: the communicator's); its type is the binding's.
    "barrier bad timeout": (
        "barrier", lambda c: c.barrier(timeout=-1),
        lambda c: c.barrier(timeout=PEER_TIMEOUT),
        ValueError, "opts->timeout_s must be a finite number >= 0 (0: the communicator's)"),
    "allreduce NaN timeout": (
        "allreduce", lambda c: c.allreduce(_good_tree(), timeout=float("nan")),
        lambda c: c.allreduce(_good_tree(), timeout=PEER_TIMEOUT),
        ddp.InvalidArgumentError, "opts->timeout_s must be a finite number >= 0"),
    "reducer infinite timeout": (
        "reducer_create", lambda c: c.reducer({"w": np.zeros(3)}, timeout=float("inf")),
        lambda c: c.reducer({"w": np.zeros(3)}, timeout=PEER_TIMEOUT),
        ddp.InvalidArgumentError, "opts->timeout_s must be a finite number >= 0"),
    "barrier timeout not a number": (
        "barrier", lambda c: c.barrier(timeout="20"),
        lambda c: c.barrier(timeout=PEER_TIMEOUT),
        TypeError, "timeout '20': expected a number of seconds"),
    "reducer of an unsupported dtype": (
        "reducer_create",
        lambda c: c.reducer({"w": np.zeros(3, np.float32), "b": np.zeros(2, np.complex128)},
                            timeout=PEER_TIMEOUT),
        lambda c: c.reducer({"w": np.zeros(3, np.float32), "b": np.zeros(2, np.float64)},
                            timeout=PEER_TIMEOUT),
        ValueError, "like['b']: dtype complex128 is not one libddp reduces"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_a_bad_argument_on_one_rank_makes_every_peer_raise_at_once(comm, case):
    collective, bad_call, good_call, error, words = BAD_CALLS[case]
    bad_rank = comm.size - 1
    if comm.rank == bad_rank:
        with pytest.raises(error) as caught:
            bad_call(comm)
        assert words in str(caught.value)
    else:
        with pytest.raises(ddp.MismatchError) as caught:
            good_call(comm)
        message = caught.value.message
        assert f"rank {bad_rank} passed invalid arguments to {collective}" in message, message
        assert words in message, message  # the bad rank's own reason
    comm.allreduce([np.ones(2)])  # every rank is in step again


@pytest.mark.parametrize("bad_gradient", [7, "bias", "marked twice"])
def test_a_bad_mark_ready_on_one_rank_fails_the_step_on_every_rank(comm, bad_gradient):
    """The bad rank raises, after ending the step with its peers, whose wait()
    raises naming it and the reason; the next step works everywhere."""
    bad_rank = comm.size - 1
    like = {"w": np.zeros(6, np.float32), "b": np.zeros(3, np.float32)}
    with comm.reducer(like, timeout=PEER_TIMEOUT) as reducer:
        grads = reducer.gradients
        if comm.rank == bad_rank:
            reducer.mark_ready(grads["w"])
            if bad_gradient == "marked twice":
                error, words = ddp.InvalidArgumentError, "already marked ready in this step"
                bad_gradient = grads["w"]
            else:
                error, words = (IndexError, "gradient index 7 is out of range") if bad_gradient == 7 \
                    else (TypeError, "mark_ready takes a gradient's index or one of")
            with pytest.raises(error, match=words):
                reducer.mark_ready(bad_gradient)
        else:
            for gradient in (grads["w"], grads["b"]):
                reducer.mark_ready(gradient)
            with pytest.raises(ddp.MismatchError) as caught:
                reducer.wait()
            message = caught.value.message
            assert f"rank {bad_rank} failed its step (unlike rank 0)" in message, message
            words = "already marked" if bad_gradient == "marked twice" else \
                "out of range" if bad_gradient == 7 else "mark_ready takes"
            assert words in message, message
        for gradient in (grads["b"], grads["w"]):  # the next step, on every rank
            gradient[...] = comm.rank
            reducer.mark_ready(gradient)
        reducer.wait()
        np.testing.assert_allclose(grads["w"], (comm.size - 1) / 2)


# Trees everywhere, and mismatches named by tree path.

def test_reducer_of_a_dict_gives_views_in_a_dict(comm):
    params = {"layer1": {"w": np.zeros((3, 4), np.float32), "b": np.zeros(4, np.float32)},
              "layer2": {"w": np.zeros((4, 2), np.float64)}}
    with comm.reducer(params, op="avg") as reducer:
        grads = reducer.gradients
        assert set(grads) == {"layer1", "layer2"} and set(grads["layer1"]) == {"w", "b"}
        for path in (("layer2", "w"), ("layer1", "b"), ("layer1", "w")):
            gradient = grads[path[0]][path[1]]
            assert gradient.shape == params[path[0]][path[1]].shape
            gradient[...] = comm.rank + 1
            reducer.mark_ready(gradient)
        reducer.wait()
        for layer in grads.values():
            for gradient in layer.values():
                np.testing.assert_allclose(gradient, (comm.size + 1) / 2)


def test_a_leaf_on_one_rank_only_is_named_by_its_path(comm):
    grads = {"layer1": {"w": np.ones(4, np.float32)}, "layer2": {"w": np.ones(4, np.float32)}}
    if comm.rank == 1:
        grads["layer2"]["bias"] = np.ones(2, np.float32)
    with pytest.raises(ddp.MismatchError) as caught:
        comm.allreduce(grads, timeout=PEER_TIMEOUT)
    assert "tensors['layer2']['bias'] is present on rank 1 but not on rank 0" in \
        caught.value.message, caught.value.message
    comm.allreduce([np.ones(2)])


def test_a_dtype_that_differs_is_named_by_its_path(comm):
    dtype = np.float64 if comm.rank == comm.size - 1 else np.float32
    grads = {"embed": np.ones(5, np.float32), "head": {"w": np.ones(6, dtype)}}
    with pytest.raises(ddp.MismatchError) as caught:
        comm.allreduce_gradients(grads, timeout=PEER_TIMEOUT)
    assert (f"tensors['head']['w'] is float32 of shape (6,) on rank 0 but float64 of shape "
            f"(6,) on rank {comm.size - 1}") in caught.value.message, caught.value.message


def test_shapes_with_equal_sizes_differ_in_a_reducer(comm):
    shape = (4, 3) if comm.rank == 1 else (3, 4)
    with pytest.raises(ddp.MismatchError) as caught:
        comm.reducer({"layer2": {"w": np.zeros(shape, np.float32)}}, timeout=PEER_TIMEOUT)
    assert ("like['layer2']['w'] is float32 of shape (3, 4) on rank 0 but float32 of shape "
            "(4, 3) on rank 1") in caught.value.message, caught.value.message
    comm.allreduce([np.ones(2)])


def test_shapes_with_equal_sizes_differ_in_optimizer_state(comm):
    shape = (4, 3) if comm.rank == 1 else (3, 4)
    state = {"exp_avg": {"w": np.zeros(shape, np.float32)}, "step": 1}
    with pytest.raises(ddp.MismatchError, match=r"state\['exp_avg'\]\['w'\] is float32 of shape "
                                                r"\(3, 4\) on rank 0 but float32 of shape \(4, 3\)"):
        comm.sync_optimizer_state(state, timeout=PEER_TIMEOUT)


def test_check_replicas_names_the_differing_leaf_by_path(comm):
    params = {"w": np.arange(4.0), "b": np.full(3, 1.0 if comm.rank == 0 else 2.0)}
    result = comm.check_replicas(params)
    assert not result and "tensors['b'] (f64[3]) differs" in result.message, result.message


@pytest.mark.parametrize("collective", ["allreduce", "broadcast", "check_replicas", "reducer"])
def test_a_generator_that_raises_on_one_rank_fails_every_rank_at_once(comm, collective):
    """The leaves are read inside the call's checks, so a generator (such as
    model.parameters()) that raises while read is this rank's bad argument."""
    last = comm.size - 1

    def leaves():
        yield np.ones(3, np.float32)
        if comm.rank == last:
            raise RuntimeError("a generator that fails while read")
        yield np.ones(2, np.float32)

    call = {"allreduce": lambda: comm.allreduce(leaves(), timeout=20),
            "broadcast": lambda: comm.broadcast(leaves(), timeout=20),
            "check_replicas": lambda: comm.check_replicas(leaves(), timeout=20),
            "reducer": lambda: comm.reducer(leaves(), timeout=20)}[collective]
    with pytest.raises((RuntimeError, ddp.MismatchError)) as caught:
        call()
    if comm.rank == last:
        assert type(caught.value) is RuntimeError
    else:
        assert f"rank {last} passed invalid arguments" in caught.value.message
        assert "a generator that fails while read" in caught.value.message
    comm.allreduce([np.ones(2)])  # every rank is in step again


def test_adopting_an_mpi4py_communicator(comm):
    """A split communicator (even and odd ranks) adopted through py2f()."""
    # A second live world communicator is refused; finalize, adopt, then restore.
    comm.finalize()
    half = WORLD.Split(WORLD.rank % 2, WORLD.rank)
    with ddp.init(comm=half, timeout=60) as adopted:
        assert (adopted.rank, adopted.size) == (half.rank, half.size)
        values = np.full(3, float(WORLD.rank))
        adopted.allreduce([values], op="sum")
        expected = sum(r for r in range(WORLD.size) if r % 2 == WORLD.rank % 2)
        np.testing.assert_array_equal(values, expected)
    half.Free()
    assert MPI.Is_initialized() and not MPI.Is_finalized()

