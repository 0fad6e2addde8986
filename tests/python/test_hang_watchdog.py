"""The hang watchdog from Python: ddp.init(hang_watchdog=...) reaches libddp.
Rank 0's thread is held inside its barrier by a logging handler that blocks
on libddp's stall warning (as a thread stuck inside MPI would be held) while
rank 1 stays away; past the deadline plus the grace, the watchdog aborts rank
0 with its message, and with hang_watchdog=False the thread comes back and
the barrier raises TimeoutError. Values mean what they mean in C: None or 0
the default, False or < 0 off; libddp refuses a NaN or infinite one, and one
that is no number is a TypeError."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ddp

SCRIPT = textwrap.dedent("""
    import logging, sys, time
    import ddp

    class StuckOnTheFirstWarning(logging.Handler):
        stuck = False

        def emit(self, record):
            print(record.getMessage(), file=sys.stderr, flush=True)
            if record.levelno >= logging.WARNING and not self.stuck:
                self.stuck = True
                time.sleep(6)

    logging.getLogger("ddp").addHandler(StuckOnTheFirstWarning())
    logging.getLogger("ddp").setLevel(logging.INFO)
    watchdog = {"on": 1, "off": False}[sys.argv[1]]
    comm = ddp.init(timeout=1, hang_watchdog=watchdog)
    if comm.rank == 0:
        try:
            comm.barrier()
        except ddp.TimeoutError as error:
            print("rank 0: the barrier raised TimeoutError", flush=True)
    else:
        time.sleep(8)
""")


def run(tmp_path, watchdog):
    script = tmp_path / "stuck.py"
    script.write_text(SCRIPT)
    environment = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                   "DDP_STALL_WARN_S": "0.3"}
    environment.pop("DDP_HANG_WATCHDOG_S", None)
    return subprocess.run(["mpirun", "-np", "2", sys.executable, str(script), watchdog],
                          env=environment, capture_output=True, text=True, timeout=60)


def test_the_watchdog_aborts_a_rank_held_past_its_deadline(tmp_path):
    result = run(tmp_path, "on")
    output = result.stdout + result.stderr
    assert "FATAL hang watchdog: barrier #1 passed its deadline (timeout 1 s)" in output, output
    assert "grace period of 1 s" in output, output
    assert "the barrier raised" not in output, output
    assert result.returncode != 0, output


def test_off_lets_the_thread_come_back_with_a_timeout(tmp_path):
    result = run(tmp_path, "off")
    output = result.stdout + result.stderr
    assert "FATAL hang watchdog" not in output, output
    assert "rank 0: the barrier raised TimeoutError" in output, output


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**400])
def test_a_nan_or_infinite_grace_is_refused_by_libddp_as_in_c(value):
    """The value is libddp's to check (ddp_init_options.hang_watchdog_s), with its message."""
    with pytest.raises(ddp.InvalidArgumentError, match=r"opts->hang_watchdog_s must be a finite "
                       r"number \(0: default, < 0: no hang watchdog\)"):
        ddp.init(backend="self", hang_watchdog=value)


@pytest.mark.parametrize("value", [True, np.bool_(False), "60", [1]])
def test_a_grace_that_is_no_number_is_a_type_error_before_init(value):
    with pytest.raises(TypeError, match="hang_watchdog .*: expected a number of seconds"):
        ddp.init(backend="self", hang_watchdog=value)


@pytest.mark.parametrize("value", [None, 0, 0.0, -1, -0.5, False, 2.5])
def test_every_grace_libddp_takes_starts_it_as_in_c(value):
    """As in C: None and 0 are the default (DDP_HANG_WATCHDOG_S, else 60),
    False and any negative number turn it off, a positive one is the grace."""
    ddp.init(backend="self", hang_watchdog=value).finalize()
