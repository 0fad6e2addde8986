"""Plots median allreduce time per strategy for each gradient list and transport."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

# Allreduce only: the allgather and reduce_scatter rows ("shards ...") are a
# table of ratios in docs/benchmark.md, on other axes than these panels.
# One buffer per size ("4 KiB" ... "256 MiB") is a second chart: time against size.
all_rows = list(csv.DictReader(open(sys.argv[1])))


def is_size(name):
    """A one-buffer row ("4 KiB", "16 MiB"), not a shards row ("shards 1 MiB")."""
    parts = name.split()
    return len(parts) == 2 and parts[0].isdigit() and parts[1] in ("KiB", "MiB")


rows = [r for r in all_rows if not r["list"].startswith("shards ") and not is_size(r["list"])]
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

sized = [r for r in all_rows if is_size(r["list"])]
if sized:
    def size_bytes(name):
        number, unit = name.split()
        return int(number) * (1024 if unit == "KiB" else 1024 * 1024)

    btls = sorted({r["btl"] for r in sized})
    fig, axes = plt.subplots(1, len(btls), figsize=(6 * len(btls), 4.5), squeeze=False)
    for ax, btl in zip(axes[0], btls):
        for strategy in dict.fromkeys(r["strategy"] for r in sized):
            points = sorted((size_bytes(r["list"]), float(r["median_ms"])) for r in sized
                            if r["btl"] == btl and r["strategy"] == strategy)
            ax.loglog([p[0] for p in points], [p[1] for p in points], marker="o", label=strategy)
        ax.set_title(f"one f32 buffer over {btl} (2 ranks)")
        ax.set_xlabel("bytes")
        ax.set_ylabel("median ms per call")
        ax.legend()
    fig.tight_layout()
    out = sys.argv[2].replace(".png", "-sizes.png")
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")
