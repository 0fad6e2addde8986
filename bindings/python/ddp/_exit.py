"""Finalizes the world communicator at interpreter exit when the program did
not, as mpi4py finalizes MPI, so that a script without `with` or finalize()
still ends cleanly under mpirun (exit status 0, no "exited improperly").

This is collective-safe because every rank of a job that ends normally runs
its exit hooks, and so reaches MPI_Finalize. A rank that ends by an unhandled
exception does not finalize: its peers may be waiting for it inside a
collective, and MPI_Finalize would wait for them in turn. It breaks the
communicator instead (ddp_comm_abort, which never waits), so that the peers'
collectives raise at once naming this rank and its exception, and exits with
status 1; mpirun then ends the whole job. A rank that leaves early with
sys.exit() (not an error) finalizes, which tells the peers too: their
collectives fail at once. A rank killed by a signal runs no hooks at all;
mpirun ends the job as well.
"""
import atexit
import sys

from . import _ffi


def finalize_at_exit(communicator):
    atexit.register(_finalize_unless_failed, communicator)


def _finalize_unless_failed(communicator):
    if communicator.finalized:
        return
    failed = getattr(sys, "last_value", None)  # set by an unhandled exception
    if failed is not None and communicator.size > 1:
        reason = f"rank {communicator.rank} ended with {type(failed).__name__}: {failed}"
        try:
            _ffi.ddp_comm_abort(communicator._handle, reason.encode("utf-8", "replace"))
        except _ffi.DDPError:
            pass  # already broken: the peers know
        return
    communicator.finalize()


def finalize_group_at_exit(communicators):
    """The ranks of a group from init_local that the program left unfinalized
    end at exit (a rank's finalize waits for no peer, so in turn)."""
    for communicator in communicators:
        finalize_at_exit(communicator)
