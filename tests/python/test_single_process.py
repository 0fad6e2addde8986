"""The Python API on one process (the `self` backend): conversions, errors,
sharding, logging, library lookup. Run without mpirun."""
import array
import collections
import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ddp
from ddp import _trees

from conftest import ROOT


@pytest.fixture(scope="module")
def comm():
    with ddp.init(backend="self") as world:
        yield world


def test_queries_on_one_process(comm):
    assert (comm.rank, comm.size, comm.local_rank, comm.local_size) == (0, 1, 0, 1)
    assert comm.backend == "self" and "rank 0 of 1" in repr(comm)


def test_second_init_raises_already_initialized(comm):
    with pytest.raises(ddp.AlreadyInitializedError, match="DDP_ERR_ALREADY_INITIALIZED"):
        ddp.init(backend="self")


def test_split_on_one_process(comm):
    assert comm.split(None) is None
    assert comm.split(-1) is None  # C's DDP_COLOR_UNDEFINED, as None
    with comm.split(3, key=-7, timeout=5) as sub, comm.split_node() as node:
        assert (sub.rank, sub.size, sub.backend, node.size) == (0, 1, "self", 1)
        assert sub.allreduce(2.5) == 2.5
    with pytest.raises(ddp.NotInitializedError, match="freed"):
        sub.barrier()
    # The value is libddp's to check, as for C: its message (InvalidArgumentError is a
    # ValueError); the binding checks only what a C int32 needs.
    with pytest.raises(ddp.InvalidArgumentError, match=r"color is -2; it must be >= 0, or "
                       r"DDP_COLOR_UNDEFINED \(-1\) to join none"):
        comm.split(-2)
    with pytest.raises(ValueError, match="color -2147483649: expected an int >= 0 that fits "
                       "in 32 bits"):
        comm.split(-2**31 - 1)


def test_every_numpy_dtype_libddp_has_passes_in_place(comm):
    for dtype in [np.int8, np.int32, np.int64, np.uint8, np.float16, np.float32, np.float64,
                  ml_dtypes.bfloat16]:
        values = np.arange(6, dtype=dtype).reshape(2, 3)
        before = values.ctypes.data
        assert comm.allreduce([values], op="sum")[0] is values
        assert values.ctypes.data == before
        np.testing.assert_array_equal(values.astype(np.float64), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.uint32, np.uint64, np.bool_,
                                   np.complex64, np.float128 if hasattr(np, "float128") else
                                   np.longdouble])
def test_dtypes_libddp_lacks_raise_value_error(comm, dtype):
    with pytest.raises(ValueError, match=rf"tensors\[0\]: dtype {np.dtype(dtype)} is not one"):
        comm.allreduce([np.zeros(3, dtype=dtype)], op="sum")


def test_non_contiguous_array_raises_value_error_instead_of_copying(comm):
    with pytest.raises(ValueError, match=r"tensors\[1\]: the array is not contiguous"):
        comm.allreduce([np.zeros(4), np.zeros((4, 4))[:, 1]])


def test_read_only_array_raises_value_error_for_writes_and_passes_for_reads(comm):
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"tensors\[0\]: the array is read-only"):
        comm.broadcast([frozen])
    assert comm.check_replicas([frozen])


def test_fortran_ordered_arrays_are_contiguous_too(comm):
    values = np.asfortranarray(np.ones((3, 2), dtype=np.float32))
    comm.allreduce(values)
    np.testing.assert_array_equal(values, 1)


def test_not_an_array_raises_type_error(comm):
    with pytest.raises(TypeError, match=r"tensors\[1\]: expected an array .* or a number, got "
                                        r"object"):
        comm.allreduce([np.ones(2), object()])
    with pytest.raises(TypeError, match=r"tensors\['name'\]: expected an array .* got str"):
        comm.broadcast({"w": np.ones(2), "name": "adam"})


def test_buffer_protocol_objects_pass_without_copy(comm):
    floats = array.array("d", [1.0, 2.0])
    comm.allreduce([floats, bytearray(b"\x01\x02")], op="max")
    assert list(floats) == [1.0, 2.0]
    with pytest.raises(ValueError, match="read-only"):
        comm.allreduce([b"\x01\x02"], op="max")


class OnlyDLPack:
    """Exposes an array through __dlpack__ alone, as a framework tensor would."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_numpy_dlpack_is_used_in_place(comm):
    values = np.arange(5, dtype=np.float32)
    comm.allreduce([OnlyDLPack(values)], op="sum")
    np.testing.assert_array_equal(values, np.arange(5))
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        comm.broadcast([OnlyDLPack(frozen)])


def test_non_contiguous_dlpack_tensor_raises_value_error(comm):
    with pytest.raises(ValueError, match="not contiguous"):
        comm.allreduce([OnlyDLPack(np.zeros((4, 4))[:, ::2])])


def test_jax_arrays_are_read_through_dlpack_and_returned_new_for_writes(comm):
    weights = jnp.arange(8, dtype=jnp.float32)
    assert comm.check_replicas([weights, jnp.ones(3, dtype=jnp.bfloat16)])
    reduced = comm.allreduce([weights, jnp.ones(3, dtype=jnp.bfloat16)])
    assert isinstance(reduced[0], type(weights)) and reduced[0] is not weights
    assert reduced[1].dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(reduced[0]), np.arange(8))
    np.testing.assert_array_equal(np.asarray(weights), np.arange(8))  # untouched


def test_numbers_come_back_as_numbers_of_their_own_type(comm):
    assert comm.allreduce(2.5) == 2.5 and type(comm.allreduce(2.5)) is float
    assert comm.allreduce(3) == 3 and type(comm.allreduce(3)) is int
    assert type(comm.allreduce(3, op="avg")) is float  # a mean of ints is a float
    assert type(comm.allreduce(np.float32(1.5))) is np.float32
    assert type(comm.allreduce_gradients(np.float64(0.5))) is np.float64
    assert comm.broadcast({"step": 7, "lr": 0.1}) == {"step": 7, "lr": 0.1}
    with pytest.raises(ValueError, match="dtype bool is not one"):
        comm.allreduce(True)
    with pytest.raises(ddp.InvalidArgumentError, match="AVG needs floating"):
        comm.allreduce(np.int32(3), op="avg")


@dataclasses.dataclass(frozen=True)
class Layer:
    weight: object
    bias: object
    name: str = dataclasses.field(default="dense", compare=False)


def test_trees_of_every_kind_keep_their_structure(comm):
    Pair = collections.namedtuple("Pair", "first second")
    tree = {"layers": [Layer(np.ones(2), jnp.zeros(1))], "pair": Pair(np.ones(1), 2.0),
            "moments": (np.zeros(3),), "skip": None}
    with pytest.raises(TypeError, match=r"tensors\['layers'\]\[0\]\.name: .*got str"):
        comm.allreduce(tree)
    tree["layers"] = [Layer(np.ones(2), jnp.zeros(1), name=None)]
    result = comm.allreduce(tree)
    assert list(result) == ["layers", "pair", "moments", "skip"] and result["skip"] is None
    assert type(result["layers"][0]) is Layer and type(result["pair"]) is Pair
    assert result["layers"][0].weight is tree["layers"][0].weight  # NumPy: in place
    assert result["layers"][0].bias is not tree["layers"][0].bias  # JAX: new
    assert result["pair"].second == 2.0 and result["moments"][0] is tree["moments"][0]


def test_a_tree_changed_in_place_is_returned_itself(comm):
    grads = {"w": np.ones(3), "b": [np.ones(1)]}
    assert comm.allreduce(grads) is grads and comm.broadcast(grads) is grads


class CudaInterface:
    """A __cuda_array_interface__ (version 3) for memory that is never touched:
    libddp refuses it first on a machine without a GPU, which is what is tested."""

    def __init__(self, stream=None):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                         "version": 3, "strides": None, "stream": stream}


def test_gpu_arrays_on_a_rank_without_a_gpu_say_why(comm):
    if comm.device >= 0:
        pytest.skip("this machine has a GPU")
    with pytest.raises(ddp.UnsupportedError) as caught:
        comm.allreduce([CudaInterface()])
    assert "tensors[0] is on cuda:0 but this rank has no GPU" in str(caught.value)
    with pytest.raises(ddp.InvalidArgumentError, match="tensors\\[0\\] is in device memory but "
                                                       "tensors\\[1\\] is in host memory"):
        comm.allreduce([CudaInterface(), np.ones(4, np.float32)])


def test_a_cuda_array_with_work_on_another_stream_is_refused(comm):
    with pytest.raises(ValueError, match="pending on stream 7, but this call runs on stream 1"):
        comm.allreduce([CudaInterface(stream=7)])


def test_streams_are_given_as_handles_or_stream_objects(comm):
    from ddp._communicator import stream_handle
    from ddp._tensors import dlpack_stream

    class CupyLikeStream:
        ptr = 0x5000

    class TorchLikeStream:
        cuda_stream = 0x6000
    assert [stream_handle(s) for s in (None, 0x1234, CupyLikeStream(), TorchLikeStream())] == \
        [0, 0x1234, 0x5000, 0x6000]
    with pytest.raises(TypeError, match="stream: expected None, an int"):
        stream_handle("default")
    # DLPack names CUDA's legacy default stream 1; ddp.h names it NULL.
    assert [dlpack_stream(s) for s in (0, 2, 0x5000)] == [1, 2, 0x5000]
    # Host arrays ignore the stream.
    values = np.ones(3)
    assert comm.allreduce(values, stream=CupyLikeStream()) is values


def test_every_op_defaults_to_sum(comm):
    import inspect
    for method in (comm.allreduce, comm.allreduce_async, comm.reduce, comm.reduce_scatter,
                   comm.reduce_scatter_async):
        assert inspect.signature(method).parameters["op"].default == "sum"


def test_avg_of_integers_is_an_invalid_argument_with_the_librarys_message(comm):
    with pytest.raises(ddp.InvalidArgumentError) as caught:
        comm.allreduce([np.ones(3, dtype=np.float32), np.ones(3, dtype=np.int32)], op="avg")
    assert caught.value.status_name == "DDP_ERR_INVALID_ARGUMENT"
    assert "tensors[1] is i32" in caught.value.message


def test_bad_op_and_root_raise(comm):
    with pytest.raises(ValueError, match="op 'median'"):
        comm.allreduce([np.ones(2)], op="median")
    with pytest.raises(ddp.InvalidArgumentError, match="root"):
        comm.broadcast([np.ones(2)], root=3)


def test_async_allreduce_wait_and_done(comm):
    values = np.full(1000, 2.0)
    request = comm.allreduce_async([values], op="sum")
    assert request.wait()[0] is values
    assert request.done()
    np.testing.assert_array_equal(values, 2.0)


def test_sync_optimizer_state_round_trip_keeps_structure_and_types(comm):
    state = {"step": 3, "lr": 0.1, "moments": [np.ones(2), (np.zeros(3), 4)], "name": "adam",
             "foreach": None, "flag": True}
    synced = comm.sync_optimizer_state(state)
    assert synced["step"] == 3 and type(synced["step"]) is int
    assert synced["lr"] == 0.1 and synced["flag"] is True and synced["name"] == "adam"
    assert synced["moments"][0] is state["moments"][0]
    assert isinstance(synced["moments"][1], tuple) and synced["moments"][1][1] == 4
    assert list(synced) == list(state)


def test_sync_optimizer_state_keeps_dict_types(comm):
    import collections
    state = collections.defaultdict(list, {"step": 2, "m": np.zeros(2)})
    synced = comm.sync_optimizer_state(collections.OrderedDict(b=1.5, a=state))
    assert type(synced) is collections.OrderedDict and list(synced) == ["b", "a"]
    assert type(synced["a"]) is collections.defaultdict and synced["a"]["step"] == 2
    assert state["step"] == 2  # the caller's containers are not modified


def test_tree_order_is_independent_of_insertion_order():
    first, _ = _trees.flatten({"b": 1, "a": np.zeros(1), 2: 5.0})
    second, _ = _trees.flatten({2: 5.0, "a": np.zeros(1), "b": 1})
    assert [type(leaf) for leaf in first] == [type(leaf) for leaf in second]
    assert first[0] == second[0] == 5.0 and first[2] == second[2] == 1


def test_sync_optimizer_state_of_jax_arrays_returns_new_ones(comm):
    state = {"mu": jnp.ones(3), "count": 4}
    synced = comm.sync_optimizer_state(state)
    assert synced["mu"] is not state["mu"] and synced["count"] == 4
    np.testing.assert_array_equal(np.asarray(synced["mu"]), 1)


def test_state_tree_refuses_unknown_leaves(comm):
    with pytest.raises(TypeError, match=r"state\['opt'\]: cannot synchronize a object"):
        comm.sync_optimizer_state({"opt": object()})


def test_check_replicas_on_one_rank_is_identical(comm):
    result = comm.check_replicas([np.arange(4)])
    assert result and result.identical and result.message == ""


def test_log_lines_reach_python_logging(comm, caplog):
    with caplog.at_level(logging.INFO, logger="ddp"):
        comm.log("hello from the test", level="warn")
    record = next(r for r in caplog.records if "hello from the test" in r.getMessage())
    assert record.levelno == logging.WARNING and record.getMessage().startswith("[ddp 0/1 ")


def test_log_rejects_unknown_level(comm):
    with pytest.raises(ValueError, match="log level 'loud'"):
        comm.log("x", level="loud")


def test_shard_indices_match_the_headers_test_vectors():
    expected = {0: [0, 8, 7, 3], 1: [9, 6, 2, 0], 2: [5, 4, 1, 9]}
    for rank, indices in expected.items():
        result = ddp.shard_indices(10, rank, 3, seed=42)
        assert result.dtype == np.int64 and result.tolist() == indices
    assert ddp.shard_indices(10, 1, 3, seed=42, strategy="contiguous").tolist() == [6, 4, 7, 2]
    assert ddp.shard_indices(10, 2, 3, seed=42, drop_last=True).tolist() == [5, 4, 1]
    assert ddp.shard_indices(10, 1, 3, shuffle=False).tolist() == [1, 4, 7, 0]
    assert ddp.shard_count(10, 3, drop_last=True) == 3


def test_shard_indices_bad_arguments_raise():
    with pytest.raises(ddp.InvalidArgumentError, match="rank"):
        ddp.shard_indices(10, 3, 3)
    with pytest.raises(ValueError, match="strategy 'blocks'"):
        ddp.shard_indices(10, 0, 3, strategy="blocks")
    with pytest.raises(ValueError, match="non-negative"):
        ddp.shard_indices(10, 0, 3, seed=-1)


def distributed_sampler_without_shuffle(n, num_replicas, rank, drop_last):
    """torch.utils.data.DistributedSampler's indices with shuffle=False, transcribed."""
    if drop_last and n % num_replicas != 0:
        num_samples = -(-(n - num_replicas) // num_replicas)
    else:
        num_samples = -(-n // num_replicas)
    total = num_samples * num_replicas
    indices = list(range(n))
    if not drop_last:
        padding = total - len(indices)
        if padding <= len(indices):
            indices += indices[:padding]
        else:
            indices += (indices * -(-padding // len(indices)))[:padding]
    else:
        indices = indices[:total]
    return indices[rank:total:num_replicas]


@pytest.mark.parametrize("n", [1, 2, 7, 10, 12, 13])
@pytest.mark.parametrize("world", [1, 2, 3, 5])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_equals_distributed_sampler_without_shuffle(n, world, drop_last):
    for rank in range(world):
        sampler = ddp.ShardedSampler(n, num_replicas=world, rank=rank, shuffle=False,
                                     drop_last=drop_last)
        expected = distributed_sampler_without_shuffle(n, world, rank, drop_last)
        assert list(sampler) == expected and len(sampler) == len(expected)


def test_sampler_with_shuffle_covers_the_data_set_and_reshuffles_per_epoch():
    samplers = [ddp.ShardedSampler(list(range(12)), num_replicas=3, rank=r, seed=7)
                for r in range(3)]
    epoch0 = [list(s) for s in samplers]
    assert sorted(sum(epoch0, [])) == list(range(12))
    for sampler in samplers:
        sampler.set_epoch(1)
    epoch1 = [list(s) for s in samplers]
    assert sorted(sum(epoch1, [])) == list(range(12)) and epoch1 != epoch0
    samplers[0].set_epoch(0)
    assert list(samplers[0]) == epoch0[0]


def test_sampler_takes_rank_and_size_from_the_communicator(comm):
    sampler = ddp.ShardedSampler(range(5))
    assert (sampler.rank, sampler.num_replicas, len(sampler)) == (0, 1, 5)
    with pytest.raises(ValueError, match="rank 4 is not in"):
        ddp.ShardedSampler(5, num_replicas=2, rank=4)


def test_the_installed_package_finds_its_own_library_without_environment():
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("DDP_LIBRARY", "LD_LIBRARY_PATH")}
    result = subprocess.run([sys.executable, "-c", "import ddp; print(ddp._ffi._lib._name)"],
                            env=environment, capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(Path(ddp.__file__).with_name("libddp.so.0"))


def test_finalized_communicator_raises_not_initialized():
    result = subprocess.run([sys.executable, "-c", """
import ddp, numpy as np
comm = ddp.init(backend="self")
comm.finalize(); comm.finalize()
try:
    comm.allreduce([np.ones(2)])
except ddp.NotInitializedError as error:
    print("raised", error.status_name)
"""], capture_output=True, text=True, cwd=ROOT)
    assert "raised DDP_ERR_NOT_INITIALIZED" in result.stdout, result.stderr


def test_allgather_and_reduce_scatter_on_one_process_copy_into_new_arrays(comm):
    tree = {"w": np.arange(6.0).reshape(3, 2), "n": 2}
    gathered = comm.allgather(tree)
    assert gathered["w"] is not tree["w"] and gathered["n"].shape == (1,)
    np.testing.assert_array_equal(gathered["w"], tree["w"])
    np.testing.assert_array_equal(comm.reduce_scatter(tree["w"], op="avg"), tree["w"])
    with pytest.raises(ValueError, match=r"tensors\['n'\]: a 0-d leaf has no first dimension"):
        comm.reduce_scatter(tree)
    exchanged = comm.alltoall(tree)  # one rank: every block stays here
    assert exchanged["w"] is not tree["w"] and exchanged["w"].shape == (3, 2)
    np.testing.assert_array_equal(exchanged["w"], tree["w"])
    assert exchanged["n"].shape == () and exchanged["n"] == 2
    np.testing.assert_array_equal(comm.alltoall_async(tree["w"]).wait(), tree["w"])
