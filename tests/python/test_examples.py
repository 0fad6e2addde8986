"""The Python examples train on 2 real ranks: the loss falls and replicas
agree, ZeRO-1 (sharded optimizer state) prints train_mlp.py's losses, so do
2 ranks as threads of one process (train_mlp.py --local 2), and
the torch example trains alike through DistributedDataParallel and
DistributedOptimizer, and the JAX example averages inside jit."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def run_on_two_ranks(example, *arguments):
    environment = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                   "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    result = subprocess.run(["mpirun", "-np", "2", sys.executable,
                             str(ROOT / "examples/python" / example), *arguments],
                            env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def printed_losses(output):
    return re.findall(r"loss (\d+\.\d+)", output)


def test_train_mlp_on_two_ranks_converges_with_identical_replicas():
    output = run_on_two_ranks("train_mlp.py")
    losses = [float(loss) for loss in printed_losses(output)]
    assert len(losses) == 15 and losses[-1] < 0.25 * losses[0], output
    assert "2 ranks (mpi)" in output and "replicas identical" in output


def test_zero_example_prints_train_mlps_losses_with_half_the_optimizer_state():
    output = run_on_two_ranks("train_mlp_zero.py")
    assert printed_losses(output) == printed_losses(run_on_two_ranks("train_mlp.py")), output
    assert len(printed_losses(output)) == 15 and "replicas identical" in output, output
    # 321 parameters, padded to 322: a momentum buffer of 161 float32 per rank.
    assert "optimizer state per rank: 644 bytes (a shard of 161 of the 321 parameters), " \
           "unsharded: 1284 bytes" in output, output


def test_train_mlp_as_two_threads_of_one_process_prints_the_two_processes_losses():
    result = subprocess.run([sys.executable, str(ROOT / "examples/python/train_mlp.py"), "--local", "2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 ranks (local)" in result.stdout, result.stdout
    assert printed_losses(result.stdout) == printed_losses(run_on_two_ranks("train_mlp.py")), result.stdout
    assert "replicas identical" in result.stdout


def test_torch_example_trains_alike_as_ddp_and_as_horovod():
    """DistributedDataParallel and DistributedOptimizer average the same
    gradients: the same losses, falling, and identical replicas."""
    as_ddp = run_on_two_ranks("train_torch.py")
    as_horovod = run_on_two_ranks("train_torch.py", "--horovod")
    losses = [float(loss) for loss in printed_losses(as_ddp)]
    assert len(losses) == 10 and losses[-1] < 0.05 * losses[0], as_ddp
    assert printed_losses(as_horovod) == printed_losses(as_ddp), as_horovod
    assert "DistributedDataParallel" in as_ddp and "DistributedOptimizer" in as_horovod
    assert "replicas identical" in as_ddp and "replicas identical" in as_horovod


def test_jax_example_averages_inside_jit_and_converges():
    output = run_on_two_ranks("train_jax.py")
    losses = [float(loss) for loss in printed_losses(output)]
    assert len(losses) == 10 and losses[-1] < 0.05 * losses[0], output
    assert "2 ranks (mpi)" in output and "replicas identical" in output, output
