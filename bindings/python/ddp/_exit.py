"""Finalizes the world communicator at interpreter exit when the program did
not, as mpi4py finalizes MPI, so that a script without `with` or finalize()
still ends cleanly under mpirun (exit status 0, no "exited improperly").

This is collective-safe because every rank of a job that ends normally runs
its exit hooks, and so reaches MPI_Finalize. A rank that ends by an unhandled
exception does not finalize: its peers may be waiting for it inside a
collective, and MPI_Finalize would wait for them in turn. It exits with
status 1 instead, and mpirun then ends the whole job. A rank killed by a
signal runs no hooks at all; mpirun ends the job as well. A rank that leaves
early with sys.exit() while its peers wait in a collective is the one case a
hook cannot tell apart from a normal end: it finalizes and waits until the
peers' collective times out (DDP_TIMEOUT_S).
"""
import atexit
import sys


def finalize_at_exit(communicator):
    atexit.register(_finalize_unless_failed, communicator)


def _finalize_unless_failed(communicator):
    if communicator.finalized:
        return
    failed = getattr(sys, "last_value", None) is not None  # set by an unhandled exception
    if failed and communicator.size > 1:
        return
    communicator.finalize()
