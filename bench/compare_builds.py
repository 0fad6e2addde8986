"""Summarizes bench/run-against's CSV: for each row (list or size, strategy)
and plane setting, this checkout's median over the other revision's (the
median of each side's per-run medians). Rows whose strategy is libddp's are
the comparison; the MPI rows of the same list, timed in the same runs, show
how far the machine itself moved between the two sides (a virtual machine's
vCPUs change places), and the last column divides that drift out.
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
    ratios = {}
    for key in order:
        this, base = times.get(key + ("this",)), times.get(key + ("base",))
        if this and base and statistics.median(base) > 0:
            ratios[key] = (statistics.median(this), statistics.median(base),
                           statistics.median(this) / statistics.median(base))
    # The machine's drift per (setting, list): the median ratio of the rows that
    # time MPI alone (not libddp, not the memcpy floor).
    drift = defaultdict(list)
    for (setting, name, strategy), (_, _, ratio) in ratios.items():
        if not strategy.startswith("libddp") and not strategy.startswith("memcpy"):
            drift[(setting, name)].append(ratio)
    print(f"this checkout's median time / {rev}'s, same runs (< 1: faster now); "
          "'÷ drift' divides by the same runs' MPI rows' ratio")
    print(f"{'planes':8} {'list':16} {'strategy':28} {'this ms':>9} {rev + ' ms':>11} {'ratio':>6} {'÷ drift':>8}")
    plain, normalized = [], []
    for key, (a, b, ratio) in ratios.items():
        moved = drift.get(key[:2])
        corrected = ratio / statistics.median(moved) if moved else float("nan")
        if key[2].startswith("libddp"):
            plain.append(ratio)
            if moved:
                normalized.append(corrected)
        print(f"{key[0]:8} {key[1]:16} {key[2]:28} {a:9.3f} {b:11.3f} {ratio:6.2f} {corrected:8.2f}")
    if plain:
        print(f"libddp rows: {len(plain)}, median ratio {statistics.median(plain):.2f} "
              f"(range {min(plain):.2f}-{max(plain):.2f})")
    if normalized:
        print(f"divided by the drift: median {statistics.median(normalized):.2f} "
              f"(range {min(normalized):.2f}-{max(normalized):.2f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
