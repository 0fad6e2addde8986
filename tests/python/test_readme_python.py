"""The README's Python section, run as a new user would: its shell block,
line by line, in a copy of the repository (tracked and new files, as a fresh
clone of this work tree has them) with a fresh venv, and with no DDP_LIBRARY,
LD_LIBRARY_PATH or PKG_CONFIG_PATH, nor Open MPI's variables. pip's cache makes the downloads local after
the first run; libddp itself is compiled once per run."""
import os
import re
import shutil
import subprocess

from conftest import ROOT

LEFT_OUT = ("DDP_LIBRARY", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "VIRTUAL_ENV", "PYTHONPATH",
            "PYTHONHOME", "DDP_BACKEND")


def readme_python_commands():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Python\n"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines()
            if line.split("#")[0].strip()]


def copy_of_the_repository(destination):
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():  # deleted but not yet committed files are skipped
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def test_readme_python_section_works_as_written(tmp_path):
    commands = readme_python_commands()
    assert any("pip install" in command for command in commands), commands
    assert commands[-1].startswith("mpirun"), commands
    clone = tmp_path / "libddp"
    copy_of_the_repository(clone)
    # Nothing of Open MPI's from the test run either: the block itself must
    # say what mpirun needs (as root, --allow-run-as-root).
    environment = {name: value for name, value in os.environ.items()
                   if name not in LEFT_OUT and not name.startswith(("PIP_", "OMPI_"))}
    environment.update(PATH=os.pathsep.join(part for part in environment["PATH"].split(
        os.pathsep) if ".venv" not in part))
    outputs = {}
    for command in commands:
        result = subprocess.run(command, shell=True, cwd=clone, env=environment,
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        outputs[command.rsplit("/", 1)[-1]] = result.stdout
    for example, epochs in (("train_mlp.py", 15), ("train_torch.py", 10), ("train_jax.py", 10)):
        output = outputs[example]
        losses = [float(loss) for loss in re.findall(r"loss (\d+\.\d+)", output)]
        assert "2 ranks (mpi)" in output and "replicas identical" in output, output
        assert len(losses) == epochs and losses[-1] < 0.25 * losses[0], output
        assert "\r" not in output, "progress drawn with carriage returns"
    library = next((clone / ".venv/lib").glob("python3*/site-packages/ddp/libddp.so.0"))
    assert library.is_file()
