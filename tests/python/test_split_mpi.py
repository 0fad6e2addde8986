"""Sub-communicators (Communicator.split, split_node) across real MPI ranks:
run under `mpirun -np 2`, `-np 3` and `-np 4` (scripts/run-python-tests). On 4
ranks the world is a 2×2 grid: rows (rank // 2, node-like) and columns
(rank % 2, replicas); fewer ranks run the same tests on smaller grids."""
import os
import threading

import numpy as np
import pytest
from mpi4py import MPI

import ddp

pytestmark = pytest.mark.skipif("OMPI_COMM_WORLD_SIZE" not in os.environ,
                                reason="needs mpirun (scripts/run-python-tests)")

WORLD = MPI.COMM_WORLD
PEER_TIMEOUT = 20  # a peer left waiting would raise TimeoutError only after this


@pytest.fixture(scope="module")
def comm():
    with ddp.init(timeout=60) as world:
        yield world


def row_of(rank):
    return rank // 2


def column_of(rank):
    return rank % 2


def members(color_of):
    """The world ranks that share this rank's color, in world order."""
    return [r for r in range(WORLD.size) if color_of(r) == color_of(WORLD.rank)]


def check_sum(comm, ranks, scale=1.0):
    """allreduce of (world rank + 1) × scale on comm: the sum over `ranks`."""
    values = np.full(300, (WORLD.rank + 1) * scale)  # beyond what agreement carries
    comm.allreduce(values)
    np.testing.assert_array_equal(values, sum((r + 1) * scale for r in ranks))


def test_rows_and_columns_have_their_ranks_and_sizes(comm):
    with comm.split(row_of(comm.rank), key=comm.rank) as rows, \
            comm.split(column_of(comm.rank), key=comm.rank) as columns:
        assert isinstance(rows, ddp.SubCommunicator) and isinstance(rows, ddp.Communicator)
        assert (rows.rank, rows.size) == (comm.rank % 2, len(members(row_of)))
        assert (columns.rank, columns.size) == (comm.rank // 2, len(members(column_of)))
        assert rows.backend == "mpi"
        assert (rows.local_rank, rows.local_size) == (rows.rank, rows.size)  # one machine
        assert not rows.freed
        assert repr(rows) == \
            f"<ddp.SubCommunicator rank {rows.rank} of {rows.size} (mpi, device -1)>"
    assert rows.freed and columns.freed
    assert repr(rows).endswith("(freed)>")


def test_key_orders_the_ranks(comm):
    with comm.split(0, key=comm.size - comm.rank) as reversed_ranks:
        assert reversed_ranks.rank == comm.size - 1 - comm.rank
    with comm.split(0) as same_keys:  # ties: the world's order
        assert same_keys.rank == comm.rank


def test_allreduce_on_rows_and_columns_gives_their_own_sums(comm):
    with comm.split(row_of(comm.rank), key=comm.rank) as rows, \
            comm.split(column_of(comm.rank), key=comm.rank) as columns:
        for scale in (1.0, 10.0, 100.0):
            check_sum(rows, members(row_of), scale)
            check_sum(columns, members(column_of), scale)
            check_sum(comm, range(comm.size), scale)
        # Numbers and trees come back as on the world.
        assert rows.allreduce(comm.rank + 1) == sum(r + 1 for r in members(row_of))
        tree = columns.allreduce({"w": np.ones(3), "step": 1}, op="max")
        assert tree["step"] == 1


def test_rows_and_columns_run_at_once_from_two_threads(comm):
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        pytest.skip("MPI runs below MPI_THREAD_MULTIPLE: one thread at a time")
    with comm.split(row_of(comm.rank), key=comm.rank) as rows, \
            comm.split(column_of(comm.rank), key=comm.rank) as columns:
        failures = []

        def on_rows():
            try:
                for round_ in range(20):
                    check_sum(rows, members(row_of), 10.0 ** (round_ % 4))
            except Exception as error:  # noqa: BLE001 (reported by the main thread)
                failures.append(error)

        thread = threading.Thread(target=on_rows)
        thread.start()
        for round_ in range(20):
            check_sum(columns, members(column_of), 10.0 ** (round_ % 4))
        thread.join()
        assert failures == []


def test_every_collective_and_the_reducer_work_on_a_sub(comm):
    column = members(column_of)
    with comm.split(column_of(comm.rank), key=comm.rank) as columns:
        values = np.full(5, float(comm.rank))
        columns.broadcast(values, root=columns.size - 1)
        np.testing.assert_array_equal(values, column[-1])
        values = np.full(5, float(comm.rank))
        columns.reduce(values, op="max", root=0)
        np.testing.assert_array_equal(values, column[-1] if columns.rank == 0 else comm.rank)
        gathered = columns.allgather(np.array([comm.rank, comm.rank], np.int32))
        np.testing.assert_array_equal(gathered, np.repeat(column, 2))
        shard = columns.reduce_scatter(np.arange(2 * columns.size, dtype=np.float64))
        np.testing.assert_array_equal(shard, columns.size * np.arange(2 * columns.rank,
                                                                      2 * columns.rank + 2))
        request = columns.allreduce_async([np.ones(4)])
        np.testing.assert_array_equal(request.wait()[0], columns.size)
        assert columns.check_replicas([np.ones(3)])
        assert not columns.check_replicas([np.full(3, float(comm.rank))]) or columns.size == 1
        state = columns.sync_optimizer_state({"m": np.full(2, float(comm.rank)), "step": comm.rank})
        assert state["step"] == column[0]
        columns.barrier()
        like = [np.zeros(3, np.float32), np.zeros(7, np.float64)]
        with columns.reducer(like, op="avg") as reducer:
            for index in reversed(range(len(like))):
                reducer.gradients[index][...] = comm.rank
                reducer.mark_ready(index)
            reducer.wait()
            for gradient in reducer.gradients:
                np.testing.assert_allclose(gradient, np.mean(column))


@pytest.mark.parametrize("undefined", [None, -1], ids=["None", "-1 (DDP_COLOR_UNDEFINED)"])
def test_undefined_color_joins_none(comm, undefined):
    sub = comm.split(undefined if comm.rank == 0 else 0, key=comm.rank)
    if comm.rank == 0:
        assert sub is None
    else:
        with sub:
            assert (sub.rank, sub.size) == (comm.rank - 1, comm.size - 1)
            check_sum(sub, range(1, comm.size))
    check_sum(comm, range(comm.size))


def test_the_node_communicator_holds_this_nodes_ranks(comm):
    node = comm.split_node()
    assert (node.rank, node.size) == (comm.local_rank, comm.local_size)
    check_sum(node, range(comm.size))  # one machine: every rank
    # A sub of the sub outlives it.
    rows = node.split(row_of(comm.rank), key=comm.rank)
    node.free()
    check_sum(rows, members(row_of))
    rows.free()


def test_a_freed_sub_raises_and_a_second_free_does_nothing(comm):
    sub = comm.split(0)
    sub.free()
    sub.free()
    assert sub.freed
    with pytest.raises(ddp.NotInitializedError, match="sub-communicator that was freed"):
        sub.allreduce(np.ones(3))
    with pytest.raises(ddp.NotInitializedError, match="sub-communicator that was freed"):
        sub.barrier()
    with pytest.raises(ddp.NotInitializedError):
        sub.reducer([np.zeros(2)])
    with pytest.raises(ddp.NotInitializedError):
        sub.split(0)
    with pytest.raises(ddp.InvalidArgumentError, match="free"):
        sub.finalize()
    check_sum(comm, range(comm.size))  # the world is untouched


def test_a_timeout_in_one_sub_leaves_the_world_and_the_other_working(comm):
    if comm.size < 2:
        pytest.skip("needs two ranks")
    with comm.split(0, timeout=1) as hasty, comm.split(0) as patient:
        if comm.rank == 0:  # alone: the others never join this barrier
            with pytest.raises(ddp.TimeoutError, match="sub-communicator color 0") as caught:
                hasty.barrier()
            assert "has not joined" in caught.value.message
        check_sum(comm, range(comm.size))
        check_sum(patient, range(comm.size))
        if comm.rank != 0:  # told by rank 0's notice
            with pytest.raises(ddp.TimeoutError, match="rank 0 gave up"):
                hasty.barrier()


BAD_SPLITS = {
    # name: (collective, the bad rank's call, its error, words)
    # A color's value is libddp's to check, as for C (its message); what a C int32
    # needs (an int that fits) is the binding's.
    "negative color": ("comm_split", lambda c: c.split(-5, timeout=PEER_TIMEOUT),
                       ddp.InvalidArgumentError,
                       "color is -5; it must be >= 0, or DDP_COLOR_UNDEFINED (-1) to join none"),
    "color not an int": ("comm_split", lambda c: c.split("a"), TypeError, "color 'a'"),
    "color too large": ("comm_split", lambda c: c.split(2**31), ValueError,
                        "color 2147483648: expected an int >= 0 that fits in 32 bits"),
    "key not an int": ("comm_split", lambda c: c.split(0, key=1.5), TypeError, "key 1.5"),
    "key too large": ("comm_split", lambda c: c.split(0, key=-2**40), ValueError,
                      "key -1099511627776"),
    # A timeout's value is libddp's to check, as for C; its type is the binding's.
    "bad timeout": ("comm_split", lambda c: c.split(0, timeout=-1), ValueError,
                    "opts->timeout_s must be a finite number >= 0 (0: the parent's)"),
    "split_node timeout": ("comm_split_node", lambda c: c.split_node(timeout=float("inf")),
                           ValueError, "opts->timeout_s must be a finite number >= 0"),
    "NaN timeout": ("comm_split", lambda c: c.split(0, timeout=float("nan")),
                    ddp.InvalidArgumentError, "opts->timeout_s must be a finite number >= 0"),
    "timeout not a number": ("comm_split", lambda c: c.split(0, timeout=True), TypeError,
                             "timeout True: expected a number of seconds"),
}


@pytest.mark.parametrize("case", BAD_SPLITS)
def test_a_bad_split_on_one_rank_makes_every_peer_raise_at_once(comm, case):
    collective, bad_call, error, words = BAD_SPLITS[case]
    bad_rank = comm.size - 1
    if comm.rank == bad_rank:
        with pytest.raises(error) as caught:
            bad_call(comm)
        assert words in str(caught.value)
    else:
        good_call = (lambda c: c.split_node()) if collective == "comm_split_node" else \
            (lambda c: c.split(0))
        with pytest.raises(ddp.MismatchError) as caught:
            good_call(comm)
        message = caught.value.message
        assert f"rank {bad_rank} passed invalid arguments to {collective}" in message, message
        assert words in message, message  # the bad rank's own reason
    check_sum(comm, range(comm.size))  # every rank is in step again


def test_finalizing_the_world_frees_its_subs(comm):
    """Last in the file: it finalizes the module's world."""
    sub = comm.split(column_of(comm.rank), key=comm.rank)
    check_sum(sub, members(column_of))
    comm.finalize()
    assert sub.freed
    with pytest.raises(ddp.NotInitializedError, match="whose world was finalized"):
        sub.allreduce(np.ones(2))
    sub.free()  # already released with the world: nothing to do
    with ddp.init(timeout=60) as world:  # MPI (started by mpi4py) still runs: a new world works
        check_sum(world, range(world.size))
