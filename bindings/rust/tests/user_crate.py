"""A crate of a user's own, outside this repository, made, built and run
exactly as docs/rust.md ("Your own crate") says: its files and commands are
read from that section's marked blocks, /path/to/libddp becomes this checkout,
and the commands run in a temporary directory with none of the test run's
variables (no DDP_LIB_DIR, PKG_CONFIG_PATH, LD_LIBRARY_PATH, Open MPI's root
permission), offline. Needs the checkout built (scripts/build build).

    python3 bindings/rust/tests/user_crate.py RESULT_FILE

Writes libtest lines (`test NAME ... ok|FAILED`) to RESULT_FILE for
scripts/summarize-tests.py; exits 1 when a step failed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "rust.md"
PLACEHOLDER = "/path/to/libddp"
MARKED_BLOCK = re.compile(r"<!-- user-crate: (\S+) -->\n```\w*\n(.*?)```", re.S)
RANKS = 2


def marked_blocks():
    """{name: text} of the doc's marked blocks, the checkout's path put in."""
    blocks = {name: text.replace(PLACEHOLDER, str(ROOT)) for name, text in MARKED_BLOCK.findall(DOC.read_text())}
    missing = {"commands", "myapp/Cargo.toml", "myapp/.cargo/config.toml", "myapp/src/main.rs"} - set(blocks)
    if missing:
        raise SystemExit(f"{DOC}: no marked block for {sorted(missing)}")
    return blocks


def newcomer_environment():
    """This environment less what the test run set and a newcomer has not."""
    dropped = ("DDP_", "PKG_CONFIG", "LD_LIBRARY_PATH", "OMPI_", "RUSTFLAGS", "CARGO_TARGET_DIR", "CARGO_BUILD_")
    return {key: value for key, value in os.environ.items() if not key.startswith(dropped)}


def script(blocks, staged):
    """The doc's commands as one shell script: after `cargo new`, the doc's
    files are copied into the new crate (the step the doc says in words)."""
    lines = ["set -ex"]
    for line in blocks["commands"].splitlines():
        lines.append(line)
        if line.startswith("cargo new "):
            lines.append(f"cp -R {staged}/myapp/. .")
    return "\n".join(lines) + "\n"


def main():
    results = Path(sys.argv[1])
    blocks = marked_blocks()
    work = Path(tempfile.mkdtemp(prefix="ddp-user-crate-"))
    try:
        staged = work / "staged"
        for name, text in blocks.items():
            if name != "commands":
                (staged / name).parent.mkdir(parents=True, exist_ok=True)
                (staged / name).write_text(text)
        run = subprocess.run(
            ["sh", "-c", script(blocks, staged)],
            cwd=work,
            env=newcomer_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=1500,
        )
        print(run.stdout)
        built = (work / "myapp" / "target" / "release" / "myapp").exists()
        ranks_done = all(f"rank {rank} of {RANKS}: replicas identical" in run.stdout for rank in range(RANKS))
        outcome = {
            "user_crate_builds_offline_from_the_docs": built,
            "user_crate_runs_under_mpirun_np2": built and run.returncode == 0 and ranks_done,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with results.open("w") as out:
        for name, ok in outcome.items():
            out.write(f"test {name} ... {'ok' if ok else 'FAILED'}\n")
        out.write(f"test result: {'ok' if all(outcome.values()) else 'FAILED'}\n")
    sys.exit(0 if all(outcome.values()) else 1)


if __name__ == "__main__":
    main()
