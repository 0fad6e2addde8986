"""allgather, reduce_scatter and alltoall across real MPI ranks: run under
`mpirun -np 2` and `-np 3` (scripts/run-python-tests). mpi4py computes the
references."""
import os
import time

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
PEER_TIMEOUT = 20  # a peer left waiting would raise TimeoutError only after this


@pytest.fixture(scope="module")
def comm():
    with ddp.init(timeout=60) as world:
        yield world


def rank_values(dtype, shape, rank):
    """Small values that every dtype holds exactly, different on every rank."""
    count = int(np.prod(shape, dtype=np.int64))
    return ((np.arange(count) + 3 * rank) % 5 + 1).astype(dtype).reshape(shape)


def gathered(dtype, shape):
    return np.concatenate([rank_values(dtype, shape, r).reshape((-1, *shape[1:]))
                           for r in range(WORLD.size)])


def reduced(op, dtype, shape):
    stacked = np.stack([rank_values(np.float64, shape, r) for r in range(WORLD.size)])
    return {"sum": stacked.sum(0), "avg": stacked.mean(0), "max": stacked.max(0)}[op].astype(dtype)


def shard(array, rank):
    rows = len(array) // WORLD.size
    return array[rank * rows:(rank + 1) * rows]


def exchanged(dtype, shape, rank):
    """What alltoall leaves on `rank`: block `rank` of every rank's leaf, in rank order."""
    blocks = [np.array_split(rank_values(dtype, shape, r).reshape(-1), WORLD.size)[rank]
              for r in range(WORLD.size)]
    return np.concatenate(blocks).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_allgather_every_dtype_concatenates_along_the_first_dimension(comm, dtype):
    shapes = [(3,), (2, 5), (0,), (1000,), ()]
    result = comm.allgather([rank_values(dtype, shape, comm.rank) for shape in shapes])
    for gathered_leaf, shape in zip(result, shapes):
        assert gathered_leaf.dtype == np.dtype(dtype)
        expected = gathered(dtype, shape) if shape else \
            np.array([rank_values(dtype, (), r) for r in range(comm.size)])
        expected_shape = (comm.size * shape[0], *shape[1:]) if shape else (comm.size,)
        assert gathered_leaf.shape == expected_shape
        np.testing.assert_array_equal(gathered_leaf, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", ["sum", "avg", "max"])
def test_reduce_scatter_every_dtype_gives_this_ranks_rows(comm, dtype, op):
    if op == "avg" and np.dtype(dtype).kind in "iu":
        with pytest.raises(ddp.InvalidArgumentError, match="AVG needs floating"):
            comm.reduce_scatter([rank_values(dtype, (comm.size,), comm.rank)], op=op)
        return
    shapes = [(comm.size,), (2 * comm.size, 3), (0, 4), (300 * comm.size,)]
    inputs = [rank_values(dtype, shape, comm.rank) for shape in shapes]
    before = [leaf.copy() for leaf in inputs]
    result = comm.reduce_scatter(inputs, op=op)
    for shard_leaf, leaf, original, shape in zip(result, inputs, before, shapes):
        assert shard_leaf.shape == (shape[0] // comm.size, *shape[1:])
        expected = shard(reduced(op, dtype, shape), comm.rank)
        np.testing.assert_array_equal(shard_leaf.astype(np.float64), expected.astype(np.float64))
        np.testing.assert_array_equal(leaf, original)  # inputs are only read


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("fusion_bytes", [None, -1], ids=["fused", "unfused"])
def test_alltoall_every_dtype_sends_block_j_to_rank_j(comm, dtype, fusion_bytes):
    shapes = [(comm.size,), (2 * comm.size, 3), (0, 4), (1000 * comm.size,), (comm.size, 5)]
    inputs = [rank_values(dtype, shape, comm.rank) for shape in shapes]
    before = [leaf.copy() for leaf in inputs]
    result = comm.alltoall(inputs, fusion_bytes=fusion_bytes)
    for exchanged_leaf, leaf, original, shape in zip(result, inputs, before, shapes):
        assert exchanged_leaf.dtype == np.dtype(dtype) and exchanged_leaf.shape == shape
        np.testing.assert_array_equal(exchanged_leaf, exchanged(dtype, shape, comm.rank))
        np.testing.assert_array_equal(leaf, original)  # inputs are only read
        # mpi4py's Alltoall of the same blocks, as a reference computed apart
        reference = np.empty(leaf.size, np.float64)
        WORLD.Alltoall(original.astype(np.float64).reshape(-1), reference)
        np.testing.assert_array_equal(exchanged_leaf.astype(np.float64).reshape(-1), reference)


def test_alltoall_twice_gives_the_input_back_in_place_of_out(comm):
    tokens = {"experts": rank_values(np.float32, (4 * comm.size, 3), comm.rank),
              "ids": rank_values(np.int64, (comm.size,), comm.rank),
              "gate": jnp.asarray(rank_values(np.float32, (2 * comm.size,), comm.rank))}
    out = {"experts": np.zeros((4 * comm.size, 3), np.float32),
           "ids": np.zeros(comm.size, np.int64), "gate": np.zeros(2 * comm.size, np.float32)}
    assert comm.alltoall(tokens, out=out, fusion_bytes=64) is out
    np.testing.assert_array_equal(out["ids"], exchanged(np.int64, (comm.size,), comm.rank))
    back = comm.alltoall(out)
    for name in tokens:
        np.testing.assert_array_equal(back[name], np.asarray(tokens[name]))
    assert isinstance(comm.alltoall(tokens["gate"]), np.ndarray)


def test_alltoall_async_returns_the_result_at_wait(comm):
    tokens = {"w": rank_values(np.float64, (100000 * comm.size,), comm.rank),
              "b": rank_values(np.float16, (comm.size, 2), comm.rank)}
    exchanging = comm.alltoall_async(tokens, fusion_bytes=4096)
    out = [np.zeros((comm.size, 7), np.int32)]
    into_out = comm.alltoall_async([rank_values(np.int32, (comm.size, 7), comm.rank)], out=out)
    result = exchanging.wait()
    np.testing.assert_array_equal(result["w"], exchanged(np.float64, (100000 * comm.size,),
                                                         comm.rank))
    np.testing.assert_array_equal(result["b"], exchanged(np.float16, (comm.size, 2), comm.rank))
    assert into_out.wait() is out and into_out.done()
    np.testing.assert_array_equal(out[0], exchanged(np.int32, (comm.size, 7), comm.rank))


def test_trees_with_and_without_out(comm):
    params = {"layer1": {"w": rank_values(np.float32, (2, 3), comm.rank),
                         "b": rank_values(np.float64, (2,), comm.rank)},
              "scale": 1.5 + comm.rank,
              "embed": jnp.asarray(rank_values(np.float32, (4,), comm.rank))}
    result = comm.allgather(params)
    assert set(result) == {"layer1", "scale", "embed"} and set(result["layer1"]) == {"w", "b"}
    np.testing.assert_array_equal(result["layer1"]["w"], gathered(np.float32, (2, 3)))
    np.testing.assert_array_equal(result["embed"], gathered(np.float32, (4,)))
    np.testing.assert_array_equal(result["scale"], 1.5 + np.arange(comm.size))
    out = {"layer1": {"w": np.zeros((2 * comm.size, 3), np.float32),
                      "b": np.zeros(2 * comm.size)},
           "scale": np.zeros(comm.size), "embed": np.zeros(4 * comm.size, np.float32)}
    assert comm.allgather(params, out=out) is out
    for mine, new in ((out["layer1"]["w"], result["layer1"]["w"]), (out["scale"], result["scale"])):
        np.testing.assert_array_equal(mine, new)
    grads = {"w": rank_values(np.float32, (2 * comm.size, 3), comm.rank),
             "b": rank_values(np.float32, (comm.size,), comm.rank)}
    shards = {"w": np.zeros((2, 3), np.float32), "b": jnp.zeros(1, jnp.float32)}
    result = comm.reduce_scatter(grads, op="sum", out=shards)
    assert result is not shards and result["w"] is shards["w"]  # a JAX leaf comes back new
    assert isinstance(result["b"], jnp.ndarray)
    np.testing.assert_array_equal(shards["w"], shard(reduced("sum", np.float32, (2 * comm.size, 3)),
                                                     comm.rank))
    np.testing.assert_array_equal(np.asarray(result["b"]),
                                  shard(reduced("sum", np.float32, (comm.size,)), comm.rank))


def test_allgather_in_place_from_this_ranks_block(comm):
    flat = np.zeros(5 * comm.size, np.float64)
    block = flat[5 * comm.rank:5 * (comm.rank + 1)]
    block[:] = rank_values(np.float64, (5,), comm.rank)
    assert comm.allgather(block, out=flat) is flat
    np.testing.assert_array_equal(flat, gathered(np.float64, (5,)))


def test_reduce_scatter_avg_then_allgather_equals_allreduce(comm):
    rng = np.random.default_rng(comm.rank)
    gradients = {"w": rng.standard_normal((4 * comm.size, 3)), "b": rng.standard_normal(comm.size)}
    averaged = comm.allreduce({name: g.copy() for name, g in gradients.items()}, op="avg")
    shards = comm.reduce_scatter(gradients, op="avg")
    whole = comm.allgather(shards)
    for name in gradients:
        np.testing.assert_allclose(whole[name], averaged[name], rtol=1e-12, atol=1e-15)


def test_async_forms_return_the_result_at_wait(comm):
    params = {"w": rank_values(np.float32, (100000,), comm.rank), "n": comm.rank}
    gathering = comm.allgather_async(params, fusion_bytes=4096)
    grads = [rank_values(np.float64, (comm.size, 7), comm.rank)]
    out = [np.zeros((1, 7))]
    scattering = comm.reduce_scatter_async(grads, op="avg", out=out)
    result = gathering.wait()
    np.testing.assert_array_equal(result["w"], gathered(np.float32, (100000,)))
    np.testing.assert_array_equal(result["n"], np.arange(comm.size))
    assert scattering.wait() is out and scattering.done()
    np.testing.assert_allclose(out[0], shard(reduced("avg", np.float64, (comm.size, 7)), comm.rank))


def test_a_first_dimension_not_a_multiple_of_size_names_the_leaf_on_every_rank(comm):
    grads = {"layer2": {"bias": np.ones(comm.size + 1, np.float32)}}
    with pytest.raises(ValueError) as caught:
        comm.reduce_scatter(grads, timeout=PEER_TIMEOUT)
    message = str(caught.value)
    assert "tensors['layer2']['bias']: its first dimension" in message, message
    assert f"pad it to {2 * comm.size}" in message, message
    comm.allreduce([np.ones(2)])  # every rank is in step again


def test_librarys_refusal_names_leaves_by_path(comm):
    buffer = np.zeros(4 * comm.size)
    with pytest.raises(ddp.InvalidArgumentError) as caught:
        comm.allgather({"a": buffer[1:5]}, out={"a": buffer})  # not this rank's block
    assert "tensors['a'] overlaps out['a'] in memory" in str(caught.value), str(caught.value)


def test_a_leaf_that_differs_between_ranks_is_named_by_its_path(comm):
    params = {"w": np.ones(4 if comm.rank == 0 else 6, np.float32)}
    with pytest.raises(ddp.MismatchError) as caught:
        comm.allgather(params, timeout=PEER_TIMEOUT)
    assert ("tensors['w'] is float32 of shape (4,) on rank 0 but float32 of shape (6,) on rank 1"
            in caught.value.message), caught.value.message


def _tree(comm):
    return {"layer1": np.ones(2 * comm.size, np.float32),
            "layer2": {"bias": np.ones(comm.size, np.float32)}}


def _gather_out(comm, bias_shape=None, bias_dtype=np.float32):
    size = comm.size
    return {"layer1": np.zeros(2 * size * size, np.float32),
            "layer2": {"bias": np.zeros(bias_shape or (size * size,), bias_dtype)}}


def _non_contiguous(comm):
    tree = _tree(comm)
    tree["layer2"]["bias"] = np.ones(2 * comm.size, np.float32)[::2]
    return tree


BAD_CALLS = {
    # name: (collective, call with bad arguments, good call, error, words)
    "allgather wrong out shape": (
        "allgather",
        lambda c: c.allgather(_tree(c), out=_gather_out(c, (c.size, c.size)), timeout=PEER_TIMEOUT),
        lambda c: c.allgather(_tree(c), out=_gather_out(c), timeout=PEER_TIMEOUT),
        ValueError, "out['layer2']['bias']: shape"),
    "allgather wrong out dtype": (
        "allgather",
        lambda c: c.allgather(_tree(c), out=_gather_out(c, bias_dtype=np.float64),
                              timeout=PEER_TIMEOUT),
        lambda c: c.allgather(_tree(c), out=_gather_out(c), timeout=PEER_TIMEOUT),
        TypeError,
        "out['layer2']['bias']: dtype float64, but tensors['layer2']['bias'] is float32"),
    "allgather_async non-contiguous": (
        "allgather", lambda c: c.allgather_async(_non_contiguous(c), timeout=PEER_TIMEOUT).wait(),
        lambda c: c.allgather_async(_tree(c), timeout=PEER_TIMEOUT).wait(),
        ValueError, "tensors['layer2']['bias']: the array is not contiguous"),
    "reduce_scatter non-contiguous": (
        "reduce_scatter", lambda c: c.reduce_scatter(_non_contiguous(c), timeout=PEER_TIMEOUT),
        lambda c: c.reduce_scatter(_tree(c), timeout=PEER_TIMEOUT),
        ValueError, "tensors['layer2']['bias']: the array is not contiguous"),
    "reduce_scatter wrong dtype": (
        "reduce_scatter",
        lambda c: c.reduce_scatter({"w": np.ones(c.size, np.complex64)}, timeout=PEER_TIMEOUT),
        lambda c: c.reduce_scatter({"w": np.ones(c.size, np.float32)}, timeout=PEER_TIMEOUT),
        ValueError, "tensors['w']: dtype complex64 is not one libddp reduces"),
    "reduce_scatter_async out of another structure": (
        "reduce_scatter",
        lambda c: c.reduce_scatter_async({"w": np.ones(c.size)}, out=[np.zeros(1), np.zeros(1)],
                                         timeout=PEER_TIMEOUT).wait(),
        lambda c: c.reduce_scatter_async({"w": np.ones(c.size)}, timeout=PEER_TIMEOUT).wait(),
        ValueError, "out has 2 leaves but tensors has 1"),
    "alltoall count not a multiple of size": (
        "alltoall",
        lambda c: c.alltoall({"w": np.ones(c.size + 1)}, timeout=PEER_TIMEOUT),
        lambda c: c.alltoall({"w": np.ones(c.size)}, timeout=PEER_TIMEOUT),
        ddp.InvalidArgumentError,
        "count is {size_plus_1}, not a multiple of the {size} ranks alltoall sends its blocks to"),
    "alltoall_async count not a multiple of size": (
        "alltoall",
        lambda c: c.alltoall_async([np.ones((2 * c.size + 1, 1))], timeout=PEER_TIMEOUT).wait(),
        lambda c: c.alltoall_async([np.ones((2 * c.size, 1))], timeout=PEER_TIMEOUT).wait(),
        ddp.InvalidArgumentError,
        "count is {twice_size_plus_1}, not a multiple of the {size} ranks alltoall sends its "
        "blocks to"),
    "alltoall wrong out shape": (
        "alltoall",
        lambda c: c.alltoall(_tree(c), out=_exchange_out(c, (c.size + 1,)), timeout=PEER_TIMEOUT),
        lambda c: c.alltoall(_tree(c), out=_exchange_out(c), timeout=PEER_TIMEOUT),
        ValueError, "out['layer2']['bias']: shape"),
    "alltoall_async wrong out dtype": (
        "alltoall",
        lambda c: c.alltoall_async(_tree(c), out=_exchange_out(c, bias_dtype=np.int32),
                                   timeout=PEER_TIMEOUT).wait(),
        lambda c: c.alltoall_async(_tree(c), out=_exchange_out(c), timeout=PEER_TIMEOUT).wait(),
        TypeError, "out['layer2']['bias']: dtype int32, but tensors['layer2']['bias'] is float32"),
    "alltoall wrong dtype": (
        "alltoall",
        lambda c: c.alltoall({"w": np.ones(c.size, np.complex64)}, timeout=PEER_TIMEOUT),
        lambda c: c.alltoall({"w": np.ones(c.size, np.float32)}, timeout=PEER_TIMEOUT),
        ValueError, "tensors['w']: dtype complex64 is not one libddp reduces"),
    "alltoall non-contiguous": (
        "alltoall", lambda c: c.alltoall(_non_contiguous(c), timeout=PEER_TIMEOUT),
        lambda c: c.alltoall(_tree(c), timeout=PEER_TIMEOUT),
        ValueError, "tensors['layer2']['bias']: the array is not contiguous"),
}


def _exchange_out(comm, bias_shape=None, bias_dtype=np.float32):
    return {"layer1": np.zeros(2 * comm.size, np.float32),
            "layer2": {"bias": np.zeros(bias_shape or (comm.size,), bias_dtype)}}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_a_bad_argument_on_one_rank_makes_every_peer_raise_at_once(comm, case):
    collective, bad_call, good_call, error, words = BAD_CALLS[case]
    words = words.format(size=comm.size, size_plus_1=comm.size + 1,
                         twice_size_plus_1=2 * comm.size + 1)
    bad_rank = comm.size - 1
    if comm.rank == bad_rank:
        with pytest.raises(error) as caught:
            bad_call(comm)
        assert words in str(caught.value), str(caught.value)
    else:
        start = time.monotonic()
        with pytest.raises(ddp.MismatchError) as caught:
            good_call(comm)
        assert time.monotonic() - start < 2
        message = caught.value.message
        assert f"rank {bad_rank} passed invalid arguments to {collective}" in message, message
        assert words in message, message  # the bad rank's own reason
    comm.allreduce([np.ones(2)])  # every rank is in step again
