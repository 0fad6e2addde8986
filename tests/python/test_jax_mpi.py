"""ddp.jax: libddp's collectives inside jax.jit (XLA custom calls through
JAX's FFI) across real MPI ranks (`mpirun -np 2` and `-np 3`,
scripts/run-python-tests). mpi4py computes the references independently; a
jitted optax training step with ddp.jax.average_gradients is checked
against one process training on the global batch. Mistakes on one rank and
timeouts must fail every rank at once, from inside jit too."""
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from mpi4py import MPI

import ddp
import ddp.jax

pytestmark = pytest.mark.skipif("OMPI_COMM_WORLD_SIZE" not in os.environ,
                                reason="needs mpirun (scripts/run-python-tests)")

WORLD = MPI.COMM_WORLD
PEER_TIMEOUT = 20


@pytest.fixture(scope="module")
def comm():
    with ddp.init(timeout=60) as world:
        yield world


def mine(comm, shape=(3, 4), dtype=np.float32):
    return (np.arange(np.prod(shape)).reshape(shape) + 10 * comm.rank).astype(dtype)


@pytest.mark.parametrize("op, mpi_op", [("sum", MPI.SUM), ("min", MPI.MIN), ("max", MPI.MAX),
                                        (ddp.Op.AVG, None)],
                         ids=["sum", "min", "max", "avg"])  # the same on every rank
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32], ids=lambda t: t.__name__)
def test_allreduce_in_jit_reduces_as_mpi(comm, op, mpi_op, dtype):
    if op == ddp.Op.AVG and dtype == np.int32:
        pytest.skip("avg is for floating types")
    local = mine(comm, dtype=dtype)
    result = jax.jit(lambda tree: ddp.jax.allreduce(tree, op=op))({"w": jnp.asarray(local)})
    wide = local.astype(np.float64)  # MPI's reference, in float64 (MPI has no float16)
    expected = np.empty_like(wide)
    WORLD.Allreduce(wide, expected, op=MPI.SUM if mpi_op is None else mpi_op)
    expected = (expected / comm.size if mpi_op is None else expected).astype(dtype)
    assert result["w"].dtype == dtype
    np.testing.assert_allclose(np.asarray(result["w"]), expected, rtol=1e-6)


def test_the_same_call_outside_jit_gives_the_same_result(comm):
    tree = {"a": jnp.asarray(mine(comm)), "b": [jnp.float32(comm.rank), 2.5]}
    inside = jax.jit(lambda t: ddp.jax.allreduce(t, op="avg"))(tree)
    outside = ddp.jax.allreduce(tree, op="avg")
    for a, b in zip(jax.tree_util.tree_leaves(inside), jax.tree_util.tree_leaves(outside)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(outside["b"][1]) == 2.5


def test_bfloat16_in_jit(comm):
    local = jnp.full((5,), comm.rank + 1, dtype=jnp.bfloat16)
    result = jax.jit(ddp.jax.allreduce)(local)
    assert result.dtype == jnp.bfloat16
    assert float(result[0]) == sum(range(1, comm.size + 1))


def test_broadcast_allgather_reduce_scatter_in_jit(comm):
    size, rank = comm.size, comm.rank
    root = size - 1
    tree = {"x": jnp.asarray(mine(comm)), "n": jnp.int32(rank)}
    broadcast = jax.jit(lambda t: ddp.jax.broadcast(t, root=root))(tree)
    np.testing.assert_array_equal(np.asarray(broadcast["x"]), WORLD.bcast(mine(comm), root=root))
    assert int(broadcast["n"]) == root
    gathered = jax.jit(ddp.jax.allgather)({"x": jnp.asarray(mine(comm, (2, 3)))})
    np.testing.assert_array_equal(np.asarray(gathered["x"]),
                                  np.concatenate(WORLD.allgather(mine(comm, (2, 3)))))
    rows = jnp.asarray(mine(comm, (2 * size, 3)))
    shard = jax.jit(lambda t: ddp.jax.reduce_scatter(t, op="sum"))(rows)
    total = WORLD.allreduce(mine(comm, (2 * size, 3)), op=MPI.SUM)
    np.testing.assert_array_equal(np.asarray(shard), total[2 * rank:2 * rank + 2])


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda t: t.__name__)
def test_alltoall_in_jit_exchanges_blocks_as_mpi(comm, dtype):
    size = comm.size
    tokens = {"x": jnp.asarray(mine(comm, (2 * size, 3), dtype)),
              "n": jnp.arange(size) + size * comm.rank}
    exchanged = jax.jit(ddp.jax.alltoall)(tokens)
    expected = np.empty((2 * size, 3), dtype)
    WORLD.Alltoall(mine(comm, (2 * size, 3), dtype), expected)
    assert exchanged["x"].dtype == dtype and exchanged["x"].shape == (2 * size, 3)
    np.testing.assert_array_equal(np.asarray(exchanged["x"]), expected)
    np.testing.assert_array_equal(np.asarray(exchanged["n"]), size * np.arange(size) + comm.rank)
    back = jax.jit(lambda t: ddp.jax.alltoall(ddp.jax.alltoall(t)))(tokens)
    np.testing.assert_array_equal(np.asarray(back["x"]), np.asarray(tokens["x"]))


@pytest.mark.parametrize("mistake", ["op", "root", "shape", "rows", "blocks", "timeout"])
def test_a_mistake_on_one_rank_fails_every_rank_from_inside_jit(comm, mistake):
    last = comm.size - 1
    bad = comm.rank == last
    x = jnp.ones((2 * comm.size, 2))
    if mistake == "op":
        call = lambda t: ddp.jax.allreduce(t, op="median" if bad else "sum", timeout=PEER_TIMEOUT)
    elif mistake == "root":
        call = lambda t: ddp.jax.broadcast(t, root=comm.size if bad else 0, timeout=PEER_TIMEOUT)
    elif mistake == "shape":
        x = jnp.ones((3 if bad else 2,))
        call = lambda t: ddp.jax.allreduce({"grads": t}, timeout=PEER_TIMEOUT)
    elif mistake == "rows":
        x = jnp.ones((comm.size + 1 if bad else 2 * comm.size, 2))
        call = lambda t: ddp.jax.reduce_scatter(t, timeout=PEER_TIMEOUT)
    elif mistake == "blocks":  # refused by libddp, as from C
        x = jnp.ones((comm.size + 1 if bad else comm.size,))
        call = lambda t: ddp.jax.alltoall(t, timeout=PEER_TIMEOUT)
    else:  # refused by libddp, as from C (0 would be the communicator's)
        call = lambda t: ddp.jax.allreduce(t, timeout=-1.0 if bad else PEER_TIMEOUT)
    start = time.monotonic()
    with pytest.raises(jax.errors.JaxRuntimeError) as caught:
        jax.block_until_ready(jax.jit(call)(x))
    assert time.monotonic() - start < PEER_TIMEOUT / 2, "a peer waited for the timeout"
    message = str(caught.value)
    if mistake == "shape":
        assert "grads" in message and f"rank {last}" in message, message
    elif mistake == "timeout":
        assert "opts->timeout_s must be a finite number >= 0" in message, message
    elif mistake == "blocks":
        assert f"not a multiple of the {comm.size} ranks alltoall sends its blocks to" in message, \
            message
    if not bad and mistake != "shape":
        assert f"rank {last} passed invalid arguments" in message, message
    jax.block_until_ready(ddp.jax.allreduce(jnp.ones(2)))  # every rank is in step again


def test_a_timeout_inside_jit_raises_on_the_rank_that_waits(comm):
    """The last rank does not join; the others' jitted allreduce ends after
    its timeout with a DEADLINE_EXCEEDED: naming the missing rank, or the
    peer that timed out first and told this one."""
    with comm.split(0, timeout=2) as sub:
        last = sub.size - 1
        if sub.rank != last:
            with pytest.raises(jax.errors.JaxRuntimeError,
                               match=f"DEADLINE_EXCEEDED: TimeoutError: .*(rank {last} has not "
                               "joined|gave up on allreduce)"):
                jax.block_until_ready(jax.jit(lambda t: ddp.jax.allreduce(t, comm=sub))(
                    jnp.ones(3)))
        WORLD.Barrier()  # the last rank stays away until the others timed out
    jax.block_until_ready(ddp.jax.allreduce(jnp.ones(2)))  # the world is untouched


def loss_fn(params, x, y):
    prediction = jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"]
    return jnp.mean((prediction - y) ** 2)


def batch(step, size=12):
    rng = np.random.default_rng(step)
    x = rng.standard_normal((size, 4)).astype(np.float32)
    return x, np.sin(x.sum(1, keepdims=True))


def initial_params(seed):
    rng = np.random.default_rng(seed)
    return {"w1": jnp.asarray(rng.standard_normal((4, 8)), jnp.float32),
            "b1": jnp.zeros(8, jnp.float32),
            "w2": jnp.asarray(rng.standard_normal((8, 1)), jnp.float32)}


def test_an_optax_step_in_jit_trains_as_one_process(comm):
    optimizer = optax.chain(ddp.jax.average_gradients(), optax.adam(0.01))
    params = ddp.jax.broadcast(initial_params(seed=comm.rank), root=0)
    state = optimizer.init(params)

    @jax.jit
    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, ddp.jax.allreduce(loss, op="avg")

    reference = initial_params(seed=0)
    single = optax.adam(0.01)
    single_state = single.init(reference)
    for index in range(5):
        x, y = batch(index)
        params, state, loss = step(params, state, x[comm.rank::comm.size], y[comm.rank::comm.size])
        reference_loss, grads = jax.value_and_grad(loss_fn)(reference, x, y)
        updates, single_state = single.update(grads, single_state, reference)
        reference = optax.apply_updates(reference, updates)
        assert float(loss) == pytest.approx(float(reference_loss), rel=1e-5)
    for name in reference:
        np.testing.assert_allclose(np.asarray(params[name]), np.asarray(reference[name]),
                                   rtol=1e-4, atol=1e-5)
    assert comm.check_replicas(params)


def test_vmap_of_allreduce_and_broadcast_is_elementwise(comm):
    rows = jnp.arange(6.0).reshape(3, 2) * (comm.rank + 1)
    total = sum(range(1, comm.size + 1))
    np.testing.assert_array_equal(np.asarray(jax.vmap(ddp.jax.allreduce)(rows)),
                                  np.arange(6.0).reshape(3, 2) * total)
    root = comm.size - 1
    np.testing.assert_array_equal(
        np.asarray(jax.jit(jax.vmap(lambda row: ddp.jax.broadcast(row, root=root)))(rows)),
        np.arange(6.0).reshape(3, 2) * (root + 1))


def test_a_call_outside_jit_waits_for_jitted_calls_made_before_it(comm):
    """Rank 0's jitted allreduce runs behind slow work while its next call,
    outside jit, is made; other ranks' jitted call is done at once. The
    calls must still pair in program order (same shapes: nothing else
    would tell them apart)."""
    @jax.jit
    def slow_then_reduce(m, x):
        for _ in range(6):
            m = jnp.tanh(m @ m)
        return ddp.jax.allreduce(x + 0 * m[0, :4].sum())

    m = jnp.ones((1200, 1200)) * 1e-4
    x = jnp.full((4,), 100.0 * (comm.rank + 1))
    jax.block_until_ready(slow_then_reduce(m, x))  # compiled
    comm.barrier()
    jitted = slow_then_reduce(m, x) if comm.rank == 0 else \
        jax.block_until_ready(jax.jit(ddp.jax.allreduce)(x))
    direct = np.full((4,), 1.0 * (comm.rank + 1), np.float32)
    comm.allreduce(direct)
    total = sum(range(1, comm.size + 1))
    np.testing.assert_array_equal(direct, np.full(4, total, np.float32))
    np.testing.assert_array_equal(np.asarray(jitted), np.full(4, 100.0 * total, np.float32))


@pytest.mark.parametrize("mistake", ["grad", "string_leaf"])
def test_a_call_that_fails_while_tracing_on_one_rank_fails_every_rank(comm, mistake):
    last = comm.size - 1
    x = jnp.ones(4)
    if comm.rank != last:
        call = jax.jit(ddp.jax.allreduce)
    elif mistake == "grad":
        call = jax.jit(jax.grad(lambda y: ddp.jax.allreduce(y, timeout=PEER_TIMEOUT).sum()))
    else:
        call = jax.jit(lambda y: ddp.jax.allreduce([y, "not an array"]))
    start = time.monotonic()
    with pytest.raises((jax.errors.JaxRuntimeError, ValueError, TypeError)) as caught:
        jax.block_until_ready(call(x))
    assert time.monotonic() - start < PEER_TIMEOUT / 2, "a peer waited for the timeout"
    if comm.rank != last:
        assert f"rank {last} passed invalid arguments to allreduce" in str(caught.value)
    jax.block_until_ready(ddp.jax.allreduce(jnp.ones(2)))  # every rank is in step again


def test_what_the_communicator_takes_ddp_jax_takes(comm):
    """NumPy scalars as arguments, an int averaged as a float, a timeout of
    0 (the communicator's, as in C), and the float0 gradients of integer
    leaves left as they are."""
    root = comm.size - 1
    assert float(jax.jit(lambda t: ddp.jax.allreduce(t, timeout=0))(jnp.float32(1))) == comm.size
    assert int(ddp.jax.broadcast(jnp.int32(comm.rank), root=np.int64(root))) == root
    assert float(ddp.jax.allreduce(comm.rank, op="avg")) == \
        pytest.approx(sum(range(comm.size)) / comm.size)
    params = {"w": jnp.ones(3), "step": jnp.int32(1)}
    grads = jax.grad(lambda p: (p["w"] * comm.rank).sum(), allow_int=True)(params)
    averaged = jax.jit(lambda g: ddp.jax.allreduce(g, op="avg"))(grads)
    assert averaged["step"].dtype == jax.dtypes.float0
    np.testing.assert_allclose(np.asarray(averaged["w"]),
                               np.full(3, sum(range(comm.size)) / comm.size))
