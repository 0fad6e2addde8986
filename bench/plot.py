"""Plots median allreduce time per strategy for each gradient list and transport."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

# Allreduce only: the allgather and reduce_scatter rows ("shards ...") are a
# table of ratios in docs/benchmark.md, on other axes than these panels.
rows = [r for r in csv.DictReader(open(sys.argv[1])) if not r["list"].startswith("shards ")]
panels = sorted({(r["list"], r["btl"]) for r in rows}, key=lambda p: (p[1], p[0]))
strategies = list(dict.fromkeys(r["strategy"] for r in rows))
times = defaultdict(dict)
for r in rows:
    times[(r["list"], r["btl"])][r["strategy"]] = float(r["median_ms"])

fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4.5))
for ax, panel in zip(axes, panels):
    values = [times[panel].get(s, 0) for s in strategies]
    colors = ["tab:green" if s == "libddp" else "tab:gray" if s.startswith("memcpy") else "tab:blue"
              for s in strategies]
    ax.barh(strategies, values, color=colors)
    ax.invert_yaxis()
    ax.set_title(f"{panel[0]} over {panel[1]}")
    ax.set_xlabel("median ms (2 ranks)")
    if panel != panels[0]:
        ax.set_yticklabels([])
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
print(f"wrote {sys.argv[2]}")
