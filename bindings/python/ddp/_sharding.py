"""Which items of a data set each rank owns: shard_indices and ShardedSampler."""
import ctypes

import numpy as np

from . import _ffi

STRATEGY_OF_NAME = {"strided": _ffi.DDP_SHARD_STRIDED, "contiguous": _ffi.DDP_SHARD_CONTIGUOUS}


def _options(shuffle, seed, epoch, drop_last, strategy):
    if strategy not in STRATEGY_OF_NAME:
        raise ValueError(f"strategy {strategy!r}: expected 'strided' or 'contiguous'")
    if seed < 0 or epoch < 0:
        raise ValueError(f"seed ({seed}) and epoch ({epoch}) must be non-negative")
    options = _ffi.ddp_shard_options()
    _ffi.ddp_shard_options_init(options, ctypes.sizeof(options))
    options.shuffle, options.seed, options.epoch = int(bool(shuffle)), seed, epoch
    options.drop_last, options.strategy = int(bool(drop_last)), STRATEGY_OF_NAME[strategy]
    return options


def shard_count(n_items, world, *, shuffle=True, seed=0, epoch=0, drop_last=False,
                strategy="strided"):
    """How many items each rank gets (the same on every rank)."""
    count = ctypes.c_int64()
    _ffi.ddp_shard_count(n_items, world, _options(shuffle, seed, epoch, drop_last, strategy),
                         count)
    return count.value


def shard_indices(n_items, rank, world, *, shuffle=True, seed=0, epoch=0, drop_last=False,
                  strategy="strided"):
    """The 0-based item indices rank owns, as a NumPy int64 array. Every language's
    binding gives the same indices for the same arguments (see ddp.h)."""
    options = _options(shuffle, seed, epoch, drop_last, strategy)
    count = ctypes.c_int64()
    _ffi.ddp_shard_count(n_items, world, options, count)
    out = np.empty(count.value, dtype=np.int64)
    _ffi.ddp_shard_indices(n_items, rank, world, options,
                           out.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)), out.size, count)
    return out


class ShardedSampler:
    """Iterates over this rank's item indices, like torch's DistributedSampler:
    every rank gets the same number of items (padding by wrap-around, or
    drop_last), and calling set_epoch(e) before each epoch reshuffles.

    `data` is a data set (anything with len) or its length. num_replicas and
    rank default to the communicator's (the one ddp.init() returned)."""

    def __init__(self, data, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, comm=None):
        self.n_items = data if isinstance(data, int) else len(data)
        if num_replicas is None or rank is None:
            from ._communicator import current_world
            world = comm or current_world()
            num_replicas = world.size if num_replicas is None else num_replicas
            rank = world.rank if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not in [0, num_replicas={num_replicas})")
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.epoch = 0

    def set_epoch(self, epoch):
        """Uses epoch's order from now on; call it at the start of every epoch."""
        self.epoch = epoch

    def indices(self):
        return shard_indices(self.n_items, self.rank, self.num_replicas, shuffle=self.shuffle,
                             seed=self.seed, epoch=self.epoch, drop_last=self.drop_last)

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return shard_count(self.n_items, self.num_replicas, shuffle=self.shuffle, seed=self.seed,
                           epoch=self.epoch, drop_last=self.drop_last)
