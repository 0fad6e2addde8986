"""The hang watchdog from Python: ddp.init(hang_watchdog=...) reaches libddp.
Rank 0's thread is held inside its barrier by a logging handler that blocks
on libddp's stall warning (as a thread stuck inside MPI would be held) while
rank 1 stays away; past the deadline plus the grace, the watchdog aborts rank
0 with its message, and with hang_watchdog=False the thread comes back and
the barrier raises TimeoutError. A bad value is a ValueError before init."""
import os
import subprocess
import sys
import textwrap

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


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), True, "60"])
def test_a_bad_grace_is_a_value_error_before_init(value):
    with pytest.raises(ValueError, match="hang_watchdog"):
        ddp.init(hang_watchdog=value)
