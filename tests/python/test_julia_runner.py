"""scripts/run-julia-tests where no julia is on PATH (scripts/run-tests puts one there
first; run alone, the runner says so and succeeds); and scripts/summarize-tests.py
counts the per-rank result files the Julia suites write."""
import os
import subprocess
import sys

from conftest import ROOT


def test_without_julia_the_runner_says_so_and_passes():
    bare_path = "/usr/bin:/bin"
    assert subprocess.run(["sh", "-c", "command -v julia"], env={"PATH": bare_path},
                          capture_output=True).returncode != 0, "a julia in /usr/bin or /bin"
    result = subprocess.run([str(ROOT / "scripts/run-julia-tests")],
                            env={**os.environ, "PATH": bare_path},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no julia on PATH" in result.stdout and "not run" in result.stdout
    assert "scripts/get-julia" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "0 passed, 0 failed, 0 skipped"


def summarize(directory):
    result = subprocess.run([sys.executable, str(ROOT / "scripts/summarize-tests.py"), str(directory)],
                            capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))


def test_summary_counts_julia_test_sets_once_across_ranks_and_ignored_ones_as_skipped(tmp_path):
    for rank in (0, 1):
        write(tmp_path / f"runtests-np2-rank{rank}.libtest", [
            "test world ... ok",
            f"test BFloat16 ... {'FAILED' if rank == 1 else 'ok'}",
            "test MPI extension: DDP.Init(MPI.COMM_WORLD) ... ignored",
            "test result: FAILED. 1 passed; 1 failed; 1 ignored"])
    write(tmp_path / "losses-as-c-2-np1-rank0.libtest",
          ["test losses equal the C example on 2 ranks ... ok", "test result: ok"])
    assert summarize(tmp_path) == "2 passed, 1 failed, 1 skipped"


def test_summary_counts_a_rank_that_wrote_nothing_as_a_failure(tmp_path):
    write(tmp_path / "runtests-np3-rank0.libtest", ["test world ... ok", "test result: ok"])
    write(tmp_path / "runtests-np3-rank1.libtest", ["test world ... ok", "test result: ok"])
    assert summarize(tmp_path) == "1 passed, 1 failed"


def test_no_julia_results_count_nothing(tmp_path):
    assert summarize(tmp_path / "julia") == "0 passed, 0 failed"
