"""bench/run-mpis's table: per buffer size, libddp's and Intel MPI's
allreduce time over Open MPI's MPI_Allreduce, each the median over the
rounds of that round's median (the btl column is "MPI/ROUND": "openmpi/2"
holds libddp's and Open MPI's rows of round 2, "intel/2" Intel MPI's)."""
import csv
import statistics
import sys
from collections import defaultdict


def main(path):
    times = defaultdict(list)  # (size, who) -> medians, one per round
    order = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            mpi = row["btl"].split("/")[0]
            who = {"libddp": "libddp", "MPI_Allreduce": "Open MPI" if mpi == "openmpi" else "Intel MPI"}.get(
                row["strategy"])
            if who is None:
                continue  # memcpy
            if row["list"] not in order:
                order.append(row["list"])
            times[(row["list"], who)].append(float(row["median_ms"]))
    print("| size | Open MPI µs | libddp ÷ Open MPI | Intel MPI ÷ Open MPI | libddp ÷ Intel MPI |")
    print("|---|---|---|---|---|")
    for size in order:
        ompi = statistics.median(times[(size, "Open MPI")])
        ddp = statistics.median(times[(size, "libddp")])
        intel = statistics.median(times[(size, "Intel MPI")]) if times[(size, "Intel MPI")] else float("nan")
        print(f"| {size} | {ompi * 1e3:.2f} | {ddp / ompi:.2f} | {intel / ompi:.2f} | {ddp / intel:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
