"""Summarizes bench/run-against's CSV: for each row (list or size, strategy)
and plane setting, this checkout's median over the other revision's (the
median of each side's per-run medians). Rows whose strategy is libddp's are
the comparison; MPI's rows, timed in the same runs, show the machine's own
drift between the two sides.
    python3 bench/compare_builds.py CSV REV"""
import csv
import statistics
import sys
from collections import defaultdict


def main(path, rev):
    times = defaultdict(list)  # (setting, list, strategy, side) -> medians
    order = []
    with open(path) as f:
        for row in csv.DictReader(f):
            side, setting = row["btl"].split("-", 1)
            key = (setting, row["list"], row["strategy"])
            if key not in order:
                order.append(key)
            times[key + (side,)].append(float(row["median_ms"]))
    print(f"this checkout's median time / {rev}'s, same runs (< 1: faster now)")
    print(f"{'planes':8} {'list':16} {'strategy':28} {'this ms':>9} {rev + ' ms':>11} {'ratio':>6}")
    libddp_ratios = []
    for key in order:
        this, base = times.get(key + ("this",)), times.get(key + ("base",))
        if not this or not base:
            continue
        a, b = statistics.median(this), statistics.median(base)
        ratio = a / b if b > 0 else float("nan")
        if key[2].startswith("libddp"):
            libddp_ratios.append(ratio)
        print(f"{key[0]:8} {key[1]:16} {key[2]:28} {a:9.3f} {b:11.3f} {ratio:6.2f}")
    if libddp_ratios:
        print(f"libddp rows: {len(libddp_ratios)}, median ratio {statistics.median(libddp_ratios):.2f}, "
              f"range {min(libddp_ratios):.2f}-{max(libddp_ratios):.2f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
