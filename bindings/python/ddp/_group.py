"""ddp.group(): one thread drives every rank of a group from ddp.init_local,
as NCCL's ncclGroupStart/ncclGroupEnd and C's ddp_group_start/ddp_group_end.
Inside the block each collective is checked and returns at once (it runs on
its communicator's background thread); the block's end waits for all of
them and raises the first one's error. What a collective returns inside the
block is a Grouped, whose wait() gives the call's result once the block has
ended: arrays written in place are already written by then.

An exception that leaves a block, nested or not (a refused argument, the
program's own), may leave some ranks' calls issued and their peers' never:
those would wait for their timeout. So that block's end first aborts every
communicator the group called (ddp_comm_abort, as a rank that stops does:
a local group's ranks are then all broken, not only those called), which
ends the calls at once, and the exception goes on; finalize the ranks after
it. Calls that would wait inside the block for peers it has not reached yet
(finalize, an async call, whose Request the block cannot wait for) are
refused there."""
import contextlib
import threading

from . import _ffi


class _Depth(threading.local):
    """This thread's open groups, and the results its outermost one owes."""

    def __init__(self):
        super().__init__()
        self.depth = 0
        self.owed = []     # Grouped results, made at the outermost end
        self.touched = {}  # id -> the communicators the open group called


_open = _Depth()


def touch(comm):
    """Notes that the open group (if any) calls `comm`."""
    if _open.depth > 0:
        _open.touched[id(comm)] = comm


def in_group():
    """Whether this thread is inside ddp.group()."""
    return _open.depth > 0


@contextlib.contextmanager
def group():
    """One thread's collectives on several ranks, run together:

        comms = ddp.init_local(4)
        with ddp.group():
            for comm, grads in zip(comms, replicas):
                comm.allreduce(grads, op="avg")   # returns at once
        # every replica's grads are averaged here

    Groups nest; the outermost end runs them. Inside one, check_replicas,
    sync_optimizer_state, the reducer and split are refused (each answers at
    once, which a grouped call cannot); an argument refused inside the group
    raises at once, and its peers' calls fail naming it as the group ends.
    Buffers stay the group's until the block ends."""
    _ffi.ddp_group_start()
    _open.depth += 1
    outermost = _open.depth == 1
    try:
        yield
    except BaseException as error:
        # At any depth: code that catches it between two blocks cannot know
        # which peers' calls were never issued. End the calls issued now.
        for comm in _open.touched.values():
            try:
                _ffi.ddp_comm_abort(comm._handle, f"an exception left ddp.group(): {error!r}".encode())
            except _ffi.DDPError:
                pass  # finalized already
        _end(outermost, raising=False)  # the block's own error is the one to see
        raise
    _end(outermost, raising=True)


def _end(outermost, raising):
    """ddp_group_end, then (outermost) the owed results made, or failed with its error."""
    _open.depth -= 1
    owed = []
    if outermost:
        owed, _open.owed, _open.touched = _open.owed, [], {}
    try:
        _ffi.ddp_group_end()
    except _ffi.DDPError as error:
        for grouped in owed:
            grouped._fail(error)
        if raising:
            raise
        return
    for grouped in owed:
        grouped._finish()


def result_of(make, buffers):
    """make() (the call's result) now, outside a group; inside one, a
    Grouped that makes it once the group has ended, keeping `buffers` (the
    call's tensor lists) alive until then: a temporary array passed to the
    call must outlive the call's return."""
    if not in_group():
        return make()
    grouped = Grouped(make, buffers)
    _open.owed.append(grouped)
    return grouped


def refuse_inside(call, why="it answers at once"):
    """Raises, inside a group, for a call that cannot be grouped: `why`."""
    if in_group():
        raise _ffi.InvalidArgumentError(
            _ffi.DDP_ERR_INVALID_ARGUMENT,
            f"{call} cannot run inside ddp.group(): {why} (call it after the block)")


class Grouped:
    """A collective issued inside ddp.group(): wait() gives its result (what
    the call returns outside a group) once the block has ended, or raises
    the group's error."""

    def __init__(self, make, buffers):
        self._make = make
        self._buffers = buffers  # the memory the group's calls use, until they end
        self._result = None
        self._error = None
        self._ended = False

    def done(self):
        """Whether the group has ended (never blocks)."""
        return self._ended

    def wait(self):
        """The call's result; RuntimeError while its group is still open."""
        if not self._ended:
            raise RuntimeError("this collective runs when its ddp.group() block ends: "
                               "call wait() after the block")
        if self._error is not None:
            raise self._error
        return self._result

    def _finish(self):
        self._ended = True
        try:
            self._result = self._make()
        except Exception as error:  # noqa: BLE001 (kept for wait())
            self._error = error
        self._make = self._buffers = None

    def _fail(self, error):
        self._ended, self._error, self._make, self._buffers = True, error, None, None
