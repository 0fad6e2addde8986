"""Draws bench/run-hierarchical's table: median allreduce time against size,
one line per way libddp went and one for the bare MPI_Allreduce (timed in
every job beside libddp; drawn from the median over the jobs)."""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

MIB = 1024 * 1024
rows = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["bytes"]) >= MIB]
lines = defaultdict(list)
bare = defaultdict(list)
for r in rows:
    lines["libddp " + r["label"]].append((int(r["bytes"]), float(r["libddp_ms"])))
    bare[int(r["bytes"])].append(float(r["mpi_allreduce_ms"]))
lines["bare MPI_Allreduce"] = [(b, statistics.median(ms)) for b, ms in bare.items()]

fig, ax = plt.subplots(figsize=(7, 4.5))
for name, points in lines.items():
    points.sort()
    ax.loglog([b / MIB for b, _ in points], [ms for _, ms in points], marker="o", label=name,
              linestyle="--" if name.startswith("bare") else "-")
ax.set_xticks([b / MIB for b, _ in sorted(lines["bare MPI_Allreduce"])])
ax.set_xticklabels([f"{b // MIB} MiB" for b, _ in sorted(lines["bare MPI_Allreduce"])])
ax.set_title("allreduce of one f32 buffer, 2 simulated nodes x 2 ranks", fontsize=10)
ax.set_xlabel("buffer size")
ax.set_ylabel("median ms per call (slowest rank)")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
print(f"wrote {sys.argv[2]}")
