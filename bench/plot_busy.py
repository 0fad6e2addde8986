"""Issue 31's chart and table: libddp's time over the best hand-made MPI
strategy's, per list (or buffer size) and per load beside the ranks, from
bench/run-busy's CSV (the btl column is "PLANE/LOAD", e.g. "shm/cpu2").

Hand-made strategies are the rows named "(a) ...", "(b) ...", "(c) ..." and,
for one buffer, "MPI_Allreduce"; libddp's row is "libddp" ("libddp reducer"
for the GEMM rows, "LIST+gemm", where it overlaps the compute)."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

LOADS = ["quiet", "cpu1", "cpu2", "mem1", "mem2"]


def is_hand_made(strategy):
    return strategy.startswith("(") or strategy == "MPI_Allreduce"


def ratios(rows):
    """{(plane, list): {load: libddp / best hand-made}}."""
    times = defaultdict(dict)
    for r in rows:
        times[(r["btl"], r["list"])][r["strategy"]] = float(r["median_ms"])
    out = defaultdict(dict)
    for (btl, name), by_strategy in times.items():
        plane, load = btl.split("/")
        ours = by_strategy.get("libddp reducer" if name.endswith("+gemm") else "libddp")
        theirs = [t for s, t in by_strategy.items() if is_hand_made(s)]
        if ours is not None and theirs:
            out[(plane, name)][load] = ours / min(theirs)
    return out


def main():
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if "/" in r["btl"]]
    table = ratios(rows)
    panels = sorted(table, key=lambda p: (p[0], p[1].endswith("+gemm"), p[1]))
    print("| plane | list or buffer | " + " | ".join(LOADS) + " |")
    print("|---|---|" + "---|" * len(LOADS))
    for panel in panels:
        cells = [f"{table[panel][load]:.2f}" if load in table[panel] else "—" for load in LOADS]
        print(f"| {panel[0]} | {panel[1]} | " + " | ".join(cells) + " |")
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(panels) * len(LOADS) / 2), 5))
    width = 0.8 / len(LOADS)
    for k, load in enumerate(LOADS):
        xs = [i + k * width for i in range(len(panels))]
        ax.bar(xs, [table[p].get(load, 0) for p in panels], width, label=load)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(panels))])
    ax.set_xticklabels([f"{p[1]}\n{p[0]}" for p in panels], rotation=60, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("libddp ÷ best hand-made MPI (below 1: libddp faster)")
    ax.set_title("2 ranks beside other work (cpu: busy loops, mem: dd of 64 MiB)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
