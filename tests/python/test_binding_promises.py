"""The core's promises kept from Python, each in a process of its own (under
mpirun where it takes ranks), so that a crash or a hang is a failure of one
test rather than of pytest: a per-call timeout on every collective, gradient
views that outlive their reducer, destructors that never wait for peers,
the library that DDP_LIBRARY names or an error, and log lines written whole."""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ddp
from conftest import ROOT

MPIRUN_ENVIRONMENT = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def run_script(tmp_path, source, ranks=None, timeout=120, environment=None, mpirun_options=()):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    command = [sys.executable, str(script)]
    if ranks:
        command = ["mpirun", *mpirun_options, "-np", str(ranks)] + command
    return subprocess.run(command, env=environment or MPIRUN_ENVIRONMENT, cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)


# Each collective with timeout=1 on rank 0 while rank 1 joins 5 s later:
# rank 0 raises TimeoutError from its own timeout, not the communicator's
# 600 s, and rank 1 is told.
TIMED_CALLS = {
    "allreduce": "comm.allreduce([np.ones(3)], timeout=TIMEOUT)",
    "allreduce_gradients": "comm.allreduce_gradients({'w': np.ones(3)}, timeout=TIMEOUT)",
    "allreduce_async": "comm.allreduce_async([np.ones(3)], timeout=TIMEOUT).wait()",
    "broadcast": "comm.broadcast([np.ones(3)], timeout=TIMEOUT)",
    "reduce": "comm.reduce([np.ones(3)], timeout=TIMEOUT)",
    "sync_optimizer_state": "comm.sync_optimizer_state({'m': np.ones(3), 'step': 1}, timeout=TIMEOUT)",
    "check_replicas": "comm.check_replicas([np.ones(3)], timeout=TIMEOUT)",
    "allgather": "comm.allgather({'w': np.ones(3)}, timeout=TIMEOUT)",
    "reduce_scatter_async": "comm.reduce_scatter_async([np.ones(4)], timeout=TIMEOUT).wait()",
    "alltoall": "comm.alltoall({'w': np.ones(4)}, timeout=TIMEOUT)",
    "barrier": "comm.barrier(timeout=TIMEOUT)",
    "reducer": "comm.reducer([np.ones(3)], timeout=TIMEOUT)",
}


@pytest.mark.parametrize("call", TIMED_CALLS)
def test_every_collective_takes_a_timeout_of_its_own(tmp_path, call):
    result = run_script(tmp_path, f"""
        import time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=600)
        TIMEOUT = 1 if comm.rank == 0 else 600
        if comm.rank == 1:
            time.sleep(5)
        try:
            {TIMED_CALLS[call]}
        except ddp.TimeoutError as error:
            print(f"rank {{comm.rank}} TimeoutError {{error}}", flush=True)
        else:
            print(f"rank {{comm.rank}} returned", flush=True)
        comm.finalize()
    """, ranks=2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rank 0 TimeoutError" in result.stdout, result.stdout + result.stderr
    assert "rank 1 TimeoutError" in result.stdout, result.stdout + result.stderr


# A timeout means in Python what it means in C: a finite number >= 0 of
# seconds, 0 (as None) meaning the default (ddp.init's: DDP_TIMEOUT_S, else
# 1800; a collective's: the communicator's; a split's: the parent's).
# libddp checks the value, so its message and status reach Python.
CALLS_WITH_A_TIMEOUT = {**TIMED_CALLS, "split": "comm.split(0, timeout=TIMEOUT).free()",
                        "split_node": "comm.split_node(timeout=TIMEOUT).free()"}
LIBDDPS_RULE = "opts->timeout_s must be a finite number >= 0"


def test_a_timeout_of_zero_means_the_default(tmp_path):
    """Every call with timeout=0 returns; ddp.init(timeout=0) takes
    DDP_TIMEOUT_S (3 s here), a split with timeout=0 its parent's, and a
    barrier with timeout=0 on it the sub-communicator's: rank 0, alone in it,
    times out after those 3 s, neither at once nor never, and tells rank 1."""
    result = run_script(tmp_path, f"""
        import os
        import time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=0)
        TIMEOUT = 0
        for name, call in {CALLS_WITH_A_TIMEOUT!r}.items():
            eval(call)
            print(f"rank {{comm.rank}} {{name}} returned", flush=True)
        told = "rank-0-timed-out"
        with comm.split(0, timeout=0) as sub:
            if comm.rank == 1:  # joins once rank 0 has timed out
                while not os.path.exists(told):
                    time.sleep(0.05)
            started = time.monotonic()
            try:
                sub.barrier(timeout=0)
            except ddp.TimeoutError as error:
                print(f"rank {{comm.rank}} TimeoutError after {{time.monotonic() - started:.1f}} s: "
                      f"{{error}}", flush=True)
            if comm.rank == 0:
                open(told, "w").close()
        comm.allreduce([np.ones(3)], timeout=0)  # the world is untouched
        print(f"rank {{comm.rank}} done", flush=True)
        comm.finalize()
    """, ranks=2, environment={**MPIRUN_ENVIRONMENT, "DDP_TIMEOUT_S": "3"})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for rank in (0, 1):
        for name in CALLS_WITH_A_TIMEOUT:
            assert f"rank {rank} {name} returned" in result.stdout, output
        assert f"rank {rank} done" in result.stdout, output
    waited = re.search(r"rank 0 TimeoutError after ([\d.]+) s: DDP_ERR_TIMEOUT: .*barrier.* timed out "
                       r"on rank 0 after", result.stdout)
    assert waited and 2.5 <= float(waited.group(1)) < 10, output
    assert re.search(r"rank 1 TimeoutError after .*rank 0 gave up", result.stdout), output


def test_a_negative_nan_or_infinite_timeout_is_refused_with_libddps_message(tmp_path):
    """As in C: InvalidArgumentError (a ValueError) with libddp's message,
    from ddp.init and from every call; a timeout that is no number is a
    TypeError of the binding's."""
    result = run_script(tmp_path, f"""
        import math
        import numpy as np
        import ddp
        for label, TIMEOUT in (("-1", -1), ("-0.5", -0.5), ("nan", math.nan), ("inf", math.inf),
                               ("-inf", -math.inf), ("-10**400", -10**400)):
            try:
                ddp.init(backend="self", timeout=TIMEOUT)
            except ddp.InvalidArgumentError as error:
                print(f"init {{label}}: ValueError {{isinstance(error, ValueError)}}: {{error}}")
        comm = ddp.init(backend="self")
        for TIMEOUT in (-1, math.nan, math.inf):
            for name, call in {CALLS_WITH_A_TIMEOUT!r}.items():
                try:
                    eval(call)
                except ddp.InvalidArgumentError as error:
                    print(f"{{name}} {{TIMEOUT}}: {{error}}")
        for TIMEOUT in ("1", True, [1], np.bool_(True)):
            try:
                comm.barrier(timeout=TIMEOUT)
            except TypeError as error:
                print(f"TypeError: {{error}}")
        comm.finalize()
    """)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for value in ("-1", "-0.5", "nan", "inf", "-inf", "-10**400"):
        assert (f"init {value}: ValueError True: DDP_ERR_INVALID_ARGUMENT: {LIBDDPS_RULE} "
                "(0: default)") in result.stdout, output
    for value in ("-1", "nan", "inf"):
        for name in CALLS_WITH_A_TIMEOUT:
            parent = "the parent's" if name.startswith("split") else "the communicator's"
            assert (f"{name} {value}: DDP_ERR_INVALID_ARGUMENT: rank 0: {LIBDDPS_RULE} "
                    f"(0: {parent})") in result.stdout, output
    assert result.stdout.count("TypeError: timeout ") == 4, output
    assert "TypeError: timeout True: expected a number of seconds" in result.stdout, output


@pytest.mark.parametrize("value", ["-1", "float('nan')", "float('inf')"],
                         ids=["negative", "nan", "inf"])
def test_a_bad_timeout_on_one_rank_fails_every_rank_at_once(tmp_path, value):
    """Rank 1 passes the bad timeout to each call, rank 0 a good one (the
    communicator's timeout is 600 s): libddp refuses it on rank 1 and tells
    rank 0, whose call raises MismatchError at once naming rank 1 and the
    reason; then both are in step again."""
    result = run_script(tmp_path, f"""
        import time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=600)
        TIMEOUT = {value} if comm.rank == 1 else 600
        for name, call in {CALLS_WITH_A_TIMEOUT!r}.items():
            started = time.monotonic()
            try:
                eval(call)
            except ddp.DDPError as error:
                when = "at once" if time.monotonic() - started < 30 else "late"
                print(f"rank {{comm.rank}} {{name}}: {{type(error).__name__}} {{when}}: "
                      f"{{error.message}}", flush=True)
            else:
                print(f"rank {{comm.rank}} {{name}}: returned", flush=True)
        comm.allreduce([np.ones(3)])
        print(f"rank {{comm.rank}} in step", flush=True)
        comm.finalize()
    """, ranks=2)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for name in CALLS_WITH_A_TIMEOUT:
        assert f"rank 1 {name}: InvalidArgumentError at once: rank 1: {LIBDDPS_RULE}" in \
            result.stdout, output
        assert re.search(rf"rank 0 {name}: MismatchError at once: rank 1 passed invalid arguments "
                         rf"to \w+ \(unlike rank 0\): {re.escape(LIBDDPS_RULE)}", result.stdout), output
    assert "rank 0 in step" in result.stdout and "rank 1 in step" in result.stdout, output


def test_gradient_views_stay_valid_after_the_reducer_and_the_communicator(tmp_path):
    """Views read and written after `with` ends, after the Reducer is
    collected and after finalize: the buckets (64 MiB, so freed memory would
    be unmapped) live as long as a view does."""
    result = run_script(tmp_path, """
        import gc
        import numpy as np
        import ddp
        comm = ddp.init(backend="self")
        like = {"big": np.zeros(1 << 24, np.float32), "small": np.zeros(3, np.float64)}
        with comm.reducer(like) as reducer:
            grads = reducer.gradients
            grads["big"][...] = 3
            for gradient in grads.values():
                reducer.mark_ready(gradient)
            reducer.wait()
        print("after with", grads["big"][0], grads["big"][-1])
        grads["big"][:] = 5
        try:
            reducer.mark_ready(0)
        except RuntimeError as error:
            print("closed:", error)
        del reducer
        gc.collect()
        print("after del", bool((grads["big"] == 5).all()))
        comm.finalize()
        print("after finalize", grads["big"][12345], grads["small"][0])
        del grads
        gc.collect()
        print("freed")
    """)
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}{result.stderr}"
    assert "after with 3.0 3.0" in result.stdout
    assert "closed: the reducer is closed" in result.stdout
    assert "after del True" in result.stdout
    assert "after finalize 5.0 0.0" in result.stdout and "freed" in result.stdout


def test_gradient_views_outlive_a_step_that_timed_out_and_the_communicator(tmp_path):
    """A step that fails with reductions in flight leaves its buckets to
    libddp until finalize; views into them are read, and freed, after it."""
    result = run_script(tmp_path, """
        import gc
        import time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=60)
        reducer = comm.reducer([np.zeros(100000), np.zeros(10)], timeout=1 if comm.rank == 0 else 60)
        grads = reducer.gradients
        reducer.mark_ready(1)
        if comm.rank == 0:
            reducer.mark_ready(0)  # rank 1 never does: this step's data cannot arrive
        else:
            time.sleep(3)
        try:
            reducer.wait()
        except ddp.TimeoutError:
            print(f"rank {comm.rank} timed out", flush=True)  # one string: the ranks print at once
        comm.finalize()
        del reducer
        gc.collect()
        print(f"rank {comm.rank} reads {grads[1][:2]}", flush=True)
        del grads
        gc.collect()
        print(f"rank {comm.rank} freed", flush=True)
    """, ranks=2)
    for rank in (0, 1):
        assert f"rank {rank} timed out" in result.stdout, result.stdout + result.stderr
        assert f"rank {rank} freed" in result.stdout, result.stdout + result.stderr


# What every rank sets up, what rank 0 drops while rank 1 has not joined,
# and how rank 1 then finishes.
DROPPED = {
    "an unfinished async request": ("",
                                    "request = comm.allreduce_async([np.ones(1000)])\n"
                                    "del request",
                                    "comm.allreduce_async([np.ones(1000)]).wait()\n"
                                    "comm.finalize()"),
    "a reducer with a step open": ("reducer = comm.reducer([np.zeros(4), np.zeros(4)])\n"
                                   "reducer.mark_ready(0)  # a step's first mark is collective",
                                   "del reducer",
                                   "os._exit(0)  # the step rank 0 left open is never finished"),
}


@pytest.mark.parametrize("dropped", DROPPED)
def test_destructors_never_wait_for_peers(tmp_path, dropped):
    """Rank 1 joins only once rank 0 says (a file) that the destructor
    returned, so a destructor that waited for rank 1 would never return, and
    rank 1 gives up after 60 s."""
    setup, drop, join = DROPPED[dropped]
    result = run_script(tmp_path, f"""
        import gc
        import os
        import time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=120)
{textwrap.indent(setup, " " * 8)}
        said = "destructor-returned"
        if comm.rank == 0:
{textwrap.indent(drop, " " * 12)}
            gc.collect()
            open(said, "w").close()
            print("rank 0: the destructor returned", flush=True)
        else:
            deadline = time.monotonic() + 60
            while not os.path.exists(said):
                if time.monotonic() > deadline:
                    print("rank 1: rank 0's destructor waited for its peers", flush=True)
                    os._exit(1)
                time.sleep(0.05)
            print("rank 1: rank 0 went on", flush=True)
{textwrap.indent(join, " " * 12)}
        if comm.rank == 0 and "os._exit" in {join!r}:
            os._exit(0)
    """, ranks=2)
    assert "rank 0: the destructor returned" in result.stdout, result.stdout + result.stderr
    assert "rank 1: rank 0 went on" in result.stdout, result.stdout + result.stderr


def test_an_unhandled_exception_on_one_rank_makes_its_peers_raise_at_once(tmp_path):
    """Rank 1 dies with a ValueError while rank 0 waits in a barrier (with
    mpirun told not to end the job): rank 0's barrier raises at once, naming
    rank 1, instead of waiting for the communicator's 600 s."""
    result = run_script(tmp_path, """
        import ddp
        comm = ddp.init(timeout=600)
        if comm.rank == 1:
            raise ValueError("a bad batch on rank 1")
        try:
            comm.barrier()
        except ddp.DDPError as error:
            print("rank 0 raised", type(error).__name__, error, flush=True)
    """, ranks=2, mpirun_options=("--mca", "orte_abort_on_non_zero_status", "0"))
    assert "rank 0 raised TimeoutError" in result.stdout, result.stdout + result.stderr
    assert "rank 1 aborted the communicator" in result.stdout, result.stdout


def test_a_rank_that_leaves_with_sys_exit_makes_its_peers_raise_at_once(tmp_path):
    """sys.exit() is no error: the rank finalizes at exit, which tells its
    peers; rank 0's barrier raises instead of waiting its 600 s."""
    result = run_script(tmp_path, """
        import sys
        import ddp
        comm = ddp.init(timeout=600)
        if comm.rank == 1:
            sys.exit(0)
        try:
            comm.barrier()
        except ddp.DDPError as error:
            print("rank 0 raised", type(error).__name__, error, flush=True)
    """, ranks=2)
    assert "rank 0 raised TimeoutError" in result.stdout, result.stdout + result.stderr
    assert "rank 1 finalized the communicator" in result.stdout, result.stdout


def test_log_lines_of_ranks_never_interleave(tmp_path):
    """Three ranks log at once into one file, as ranks whose stderr is one
    file or terminal do (a batch system's job log). Each line is one write,
    so none is cut by another rank's; mpirun's own output forwarding is
    bypassed, since it cuts what it forwards into chunks of its own."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import ddp
        comm = ddp.init()
        letter = "abc"[comm.rank]
        for line in range(2000):
            comm.log(f"line {line} " + letter * 100)
        comm.finalize()
    """))
    shared = tmp_path / "shared.log"
    result = subprocess.run(["mpirun", "-np", "3", "sh", "-c",
                             f"exec {sys.executable} {script} 2>>{shared}"],
                            env=MPIRUN_ENVIRONMENT, cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    whole = re.compile(r"\[ddp (\d)/3 [\d:.]+\] line \d+ (a{100}|b{100}|c{100})")
    lines = [line for line in shared.read_text().splitlines() if line]
    broken = [line[:80] + "..." + line[-40:] for line in lines if not whole.fullmatch(line)]
    assert len(lines) == 6000 and not broken, f"{len(lines)} lines, {len(broken)} broken: {broken[:3]}"


def install_of_libddp(destination):
    """libddp installed (`meson install`) into a prefix under destination, as
    the README's install puts it in /usr/local; the directory of its
    libddp.so.0."""
    build = next(path for path in (ROOT / "build-python", ROOT / "build")
                 if (path / "build.ninja").exists())
    subprocess.run(["meson", "install", "-C", str(build), "--no-rebuild", "--quiet",
                    "--destdir", str(destination)], check=True, capture_output=True)
    return next(destination.rglob("libddp.so.0")).parent


@pytest.fixture(scope="module")
def other_libddp(tmp_path_factory):
    return install_of_libddp(tmp_path_factory.mktemp("prefix"))


def loaded_library(environment):
    return subprocess.run([sys.executable, "-c", "import ddp; print(ddp._ffi._lib._name)"],
                          env=environment, capture_output=True, text=True, cwd="/")


def test_a_ddp_library_that_cannot_be_loaded_is_an_error_not_a_fallback(tmp_path, other_libddp):
    environment = {**os.environ, "DDP_LIBRARY": str(tmp_path / "missing.so"),
                   "LD_LIBRARY_PATH": str(other_libddp)}
    result = loaded_library(environment)
    assert result.returncode != 0, f"loaded {result.stdout.strip()} instead of failing"
    assert f"DDP_LIBRARY={tmp_path / 'missing.so'} cannot be loaded" in result.stderr


def test_the_package_loads_its_own_library_with_another_on_the_loader_path(other_libddp):
    environment = {name: value for name, value in os.environ.items() if name != "DDP_LIBRARY"}
    environment["LD_LIBRARY_PATH"] = str(other_libddp)
    result = loaded_library(environment)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(Path(ddp.__file__).with_name("libddp.so.0"))


def test_a_ddp_library_that_loads_is_the_one_used(other_libddp):
    environment = {**os.environ, "DDP_LIBRARY": str(other_libddp / "libddp.so.0")}
    result = loaded_library(environment)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(other_libddp / "libddp.so.0")


def test_tracebacks_name_the_public_exception_classes(tmp_path):
    """An uncaught libddp error prints as ddp.MismatchError (the class users
    catch), never as the private module that defines it; every error class is
    ddp's own."""
    result = run_script(tmp_path, """
        import numpy as np
        import ddp
        comm = ddp.init(timeout=600)
        comm.allreduce([np.ones(3 + comm.rank)])   # counts differ: MismatchError
    """, ranks=2)
    assert result.returncode != 0
    assert "ddp.MismatchError: DDP_ERR_MISMATCH" in result.stderr, result.stderr
    assert "ddp._ffi" not in result.stderr, result.stderr
    for error in [ddp.DDPError] + ddp.DDPError.__subclasses__():
        assert error.__module__ == "ddp" and getattr(ddp, error.__name__) is error, error


FAILURES = {
    # what the script does -> (its source, its exit status)
    "caught mismatch": ("""
        try:
            comm.allreduce([np.ones(3 + comm.rank)])
        except ddp.MismatchError:
            pass
        comm.allreduce([np.ones(3)])
    """, 0),
    "uncaught mismatch": ("""
        comm.allreduce([np.ones(3 + comm.rank)])
    """, 1),
    "timeout": ("""
        if comm.rank == 1:
            time.sleep(3)
        try:
            comm.barrier(timeout=1)
        except ddp.TimeoutError:
            pass
    """, 0),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failure_puts_at_most_one_short_line_per_rank_in_the_log(tmp_path, failure):
    """After 60 good calls, a caught mismatch logs nothing (its message says
    it all); an uncaught one or a timeout logs one line per rank, naming the
    flight recorder's file, which holds the dump: no JSON in the log."""
    source, status = FAILURES[failure]
    reports = tmp_path / "reports"
    result = run_script(tmp_path, textwrap.dedent("""
        import time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=600)
        for _ in range(60):
            comm.allreduce([np.ones(3)])
    """) + textwrap.dedent(source), ranks=2,
                        environment={**MPIRUN_ENVIRONMENT, "DDP_FLIGHT_RECORDER_DIR": str(reports)})
    assert (result.returncode != 0) == (status != 0), result.stderr
    logged = {rank: [line for line in result.stderr.splitlines() if line.startswith(f"[ddp {rank}/2 ")]
              for rank in (0, 1)}
    for rank, lines in logged.items():
        assert len(lines) <= 1 and sum(map(len, lines)) <= 400, lines
        assert "{" not in "".join(lines), lines
        if failure == "caught mismatch":
            assert lines == [] and not reports.exists(), result.stderr
        elif lines:
            dump = reports / f"ddp-flight-recorder.rank{rank}.json"
            assert f"(flight recorder: {dump})" in lines[0] and dump.exists(), lines
    if failure != "caught mismatch":
        assert sum(map(len, logged.values())) >= 1, result.stderr  # the rank that broke says so


def test_messages_and_dumps_number_the_users_calls_not_the_bindings(tmp_path):
    """sync_optimizer_state and reducer creation each make an allreduce of the
    binding's own (checking the ranks' trees): libddp numbers those apart, so
    that the reducer's fourth step, the user's sixth call, is "reducer step
    #6" in the timeout's message, and the dump marks the binding's calls."""
    reports = tmp_path / "reports"
    result = run_script(tmp_path, """
        import json, time
        import numpy as np
        import ddp
        comm = ddp.init(timeout=600)
        comm.sync_optimizer_state({"w": np.ones(3), "step": 1})
        reducer = comm.reducer([np.ones(3)], timeout=2)
        for _ in range(3):
            reducer.mark_ready(0)
            reducer.wait()
        if comm.rank == 1:
            time.sleep(4)
        try:
            reducer.mark_ready(0)
            reducer.wait()
        except ddp.TimeoutError as error:
            print(f"rank {comm.rank} raised: {error}", flush=True)
    """, ranks=2, environment={**MPIRUN_ENVIRONMENT, "DDP_FLIGHT_RECORDER_DIR": str(reports)})
    assert "rank 0 raised: DDP_ERR_TIMEOUT: reducer step #6 timed out on rank 0" in result.stdout, \
        result.stdout + result.stderr[-3000:]
    calls = json.loads((reports / "ddp-flight-recorder.rank0.json").read_text())["calls"]
    numbered = [(call["kind"], call["call"], call.get("binding", False)) for call in calls]
    assert numbered == [("sync_optimizer_state", 1, False), ("allreduce", 1, True), ("reducer_create", 2, False),
                        ("allreduce", 2, True)] + [("reducer step", n, False) for n in range(3, 7)], numbered
