"""The Python example trains on 2 real ranks: the loss falls and replicas agree."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def test_train_mlp_on_two_ranks_converges_with_identical_replicas():
    environment = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                   "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    result = subprocess.run(["mpirun", "-np", "2", sys.executable,
                             str(ROOT / "examples/python/train_mlp.py")],
                            env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    losses = [float(loss) for loss in re.findall(r"loss (\d+\.\d+)", result.stdout)]
    assert len(losses) == 15 and losses[-1] < 0.25 * losses[0], result.stdout
    assert "2 ranks (mpi)" in result.stdout and "replicas identical" in result.stdout
