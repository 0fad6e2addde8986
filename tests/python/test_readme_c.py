"""The README's C program, compiled as its text stands against the build tree's
header and library and run on 2 real ranks: the broadcast and the averaged
gradients give the same weights on both ranks."""
import os
import re
import subprocess

from conftest import ROOT


def readme_c_program():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### C\n"):]
    return re.search(r"```c\n(.*?)```", section, re.S).group(1)


def test_readme_c_program_builds_and_runs_on_two_ranks(tmp_path):
    source = tmp_path / "readme.c"
    source.write_text(readme_c_program())
    program = tmp_path / "readme"
    library_dir = ROOT / "build" / "src"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", f"-I{ROOT / 'include'}", str(source),
                    "-o", str(program), f"-L{library_dir}", "-lddp",
                    f"-Wl,-rpath,{library_dir}"], check=True)
    environment = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                   "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    environment.pop("DDP_LIBRARY", None)
    result = subprocess.run(["mpirun", "-np", "2", str(program)], env=environment,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    # 42 broadcast from rank 0; gradients 0 and 1 average to 0.5; 3 steps of 0.1 * 0.5.
    assert sorted(result.stdout.splitlines()) == [
        "rank 0 of 2: weights[0] = 41.85", "rank 1 of 2: weights[0] = 41.85"], result.stdout
