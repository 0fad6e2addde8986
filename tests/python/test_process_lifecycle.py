"""How a script's ranks start and end, as users write them: no `with` and no
finalize(), an exception on one rank, log lines without logging configured,
and a run without a launcher. Each case is a real script under real mpirun."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

MPIRUN_ENVIRONMENT = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def run_script(tmp_path, source, ranks=None, timeout=120, environment=None):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    command = [sys.executable, str(script)]
    if ranks:
        command = ["mpirun", "-np", str(ranks)] + command
    started = time.monotonic()
    result = subprocess.run(command, env=environment or MPIRUN_ENVIRONMENT, cwd=tmp_path,
                            capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - started


@pytest.mark.parametrize("ranks", [2, 3])
def test_a_script_that_never_finalizes_exits_zero_under_mpirun(tmp_path, ranks):
    result, _ = run_script(tmp_path, """
        import numpy as np
        import ddp
        comm = ddp.init()
        total = comm.allreduce(float(comm.rank + 1))
        assert total == comm.size * (comm.size + 1) / 2, total
        print("rank", comm.rank, "total", total)
    """, ranks=ranks)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "exited improperly" not in output and "did not call" not in output
    assert output.count("total") == ranks


@pytest.mark.parametrize("with_block", [False, True])
def test_an_exception_on_one_rank_ends_the_job_at_once(tmp_path, with_block):
    """Rank 1 raises while rank 0 waits in an allreduce (timeout 1800 s): rank 1
    must not finalize (that would wait for rank 0), so mpirun ends the job."""
    body = """
        if comm.rank == 1:
            raise RuntimeError("rank 1 fails")
        comm.allreduce(np.ones(4))
    """
    source = "import numpy as np\nimport ddp\n" + (
        "with ddp.init() as comm:\n" + textwrap.indent(textwrap.dedent(body), "    ")
        if with_block else "comm = ddp.init()\n" + textwrap.dedent(body))
    result, seconds = run_script(tmp_path, source, ranks=2, timeout=120)
    assert result.returncode != 0
    assert "RuntimeError: rank 1 fails" in result.stderr
    assert seconds < 60, f"the job took {seconds:.0f} s to end"


def test_log_lines_show_without_logging_configured_and_flow_into_it_once_it_is(tmp_path):
    result, _ = run_script(tmp_path, """
        import logging
        import ddp
        comm = ddp.init(backend="self")
        comm.log("before logging is configured")
        logging.basicConfig(level=logging.INFO, format="via-logging %(name)s %(message)s")
        comm.log("after logging is configured")
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("[ddp 0/1 ") and line.endswith("before logging is configured")
               for line in lines), result.stderr
    assert any(line.startswith("via-logging ddp [ddp 0/1 ") and
               line.endswith("after logging is configured") for line in lines), result.stderr
    assert sum("after logging is configured" in line for line in lines) == 1


def test_without_a_launcher_the_single_rank_is_told_once(tmp_path):
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("OMPI_", "PMIX_", "PMI_", "DDP_BACKEND"))}
    result, _ = run_script(tmp_path, """
        import ddp
        for _ in range(2):
            comm = ddp.init()
            assert comm.size == 1 and comm.backend == "self"
            comm.finalize()
    """, environment=environment)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("no MPI launcher found") == 1, result.stderr
    assert "mpirun -np N python" in result.stderr and "script.py" in result.stderr
