"""What every rank did: a timeline of the collectives, and the flight recorder.

    with ddp.timeline("run/trace.json"):      # every rank: run/trace.rank0.json, ...
        for step in ...:
            grads = comm.allreduce_gradients(grads)   # leaves named by their tree paths
    # then: scripts/ddp-trace merge all.json run/trace.rank*.json  (chrome://tracing, Perfetto)

    ddp.dump_flight_recorder("fr.%r.json")    # the last collectives of this rank, now

While a timeline records, the collectives pass each leaf's tree path
("layer1.weight", "opt.mu.0") as its name, so buckets and calls in the trace
say which parameters they carried.
"""
import contextlib
import os

from . import _ffi, _leaf_names
from ._communicator import current_world


def rank_file(path, rank):
    """The file ddp.h names for `path` on `rank`: "%r" replaced by the rank,
    else ".rankR" before a final ".json", else ".rankR.json" appended."""
    path = os.fspath(path)
    if "%r" in path:
        return path.replace("%r", str(rank))
    if path.endswith(".json") and len(path) > len(".json"):
        return f"{path[:-len('.json')]}.rank{rank}.json"
    return f"{path}.rank{rank}.json"


def _checked_path(path, what):
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what}: expected a str or os.PathLike, got {type(path).__name__}")
    return os.fsencode(path)


@contextlib.contextmanager
def timeline(path, comm=None):
    """Records a Chrome trace-event timeline of every collective while the
    block runs; yields this rank's file name. Collective: every rank enters
    it (in the same place among its collectives). See ddp_timeline_start."""
    comm = comm if comm is not None else current_world()
    _ffi.ddp_timeline_start(comm._handle, _checked_path(path, "path"))
    _leaf_names.recording = True
    try:
        yield rank_file(path, comm.rank)
    finally:
        _leaf_names.recording = _leaf_names.timeline_from_environment()
        if not comm.finalized:
            _ffi.ddp_timeline_stop(comm._handle)


def dump_flight_recorder(path=None, comm=None):
    """Writes this rank's flight recorder (its last collectives, with their
    sequence numbers, sizes, times and states) to `path` as given, every
    "%r" in it replaced by the rank ("fr.%r.json": a file per rank), or
    with None where automatic dumps go (DDP_FLIGHT_RECORDER_DIR, else a
    folder per job under the temporary directory; the log names the file).
    Local."""
    comm = comm if comm is not None else current_world()
    _ffi.ddp_dump_flight_recorder(comm._handle, None if path is None else _checked_path(path, "path"))
