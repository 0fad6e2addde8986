"""bench/run-mpis's table: per placement of the two ranks' vCPUs and per
buffer size, libddp's and Intel MPI's allreduce time over Open MPI's
MPI_Allreduce. The btl column is "MPI/ROUND" ("openmpi/2": libddp's and
Open MPI's rows of round 2, "intel/2": Intel MPI's); each row carries the
cache-line round trip measured just before it, which says the placement
(near: the ranks share an L3; far: a slow link between them). A time is
the median, over the rows of that placement, of each row's median."""
import csv
import statistics
import sys
from collections import defaultdict

FAR_NS = 300  # round trips: ~100 ns near, ~500 ns far on the development VM


def main(path):
    times = defaultdict(list)  # (placement, size, who) -> medians
    sizes = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            mpi = row["btl"].split("/")[0]
            who = {"libddp": "libddp", "MPI_Allreduce": "Open MPI" if mpi == "openmpi" else "Intel MPI"}.get(
                row["strategy"])
            if who is None:
                continue  # memcpy
            if row["list"] not in sizes:
                sizes.append(row["list"])
            placement = "far" if float(row["round_trip_ns"] or 0) >= FAR_NS else "near"
            times[(placement, row["list"], who)].append(float(row["median_ms"]))
    print("| placement | size | Open MPI µs | libddp ÷ Open MPI | Intel MPI ÷ Open MPI | libddp ÷ Intel MPI | rows |")
    print("|---|---|---|---|---|---|---|")
    for placement in ("near", "far"):
        for size in sizes:
            got = {who: times[(placement, size, who)] for who in ("Open MPI", "libddp", "Intel MPI")}
            if not all(got.values()):
                continue  # this placement lacks one of them at this size
            ompi, ddp, intel = (statistics.median(got[w]) for w in ("Open MPI", "libddp", "Intel MPI"))
            rows = f"{len(got['Open MPI'])}+{len(got['Intel MPI'])}"
            print(f"| {placement} | {size} | {ompi * 1e3:.2f} | {ddp / ompi:.2f} | {intel / ompi:.2f} | "
                  f"{ddp / intel:.2f} | {rows} |")


if __name__ == "__main__":
    main(sys.argv[1])
