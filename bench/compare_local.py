"""bench/run-local's table: per buffer size, the time of 2 ranks that are
threads of one process (btl "local/2 threads") over that of 2 processes
through libddp's shared-memory plane and through MPI_Allreduce (btl
"processes/ROUND"), and a memcpy of the bytes over it; each time the median
over the rounds of that round's median."""
import csv
import statistics
import sys
from collections import defaultdict


def main(path):
    times = defaultdict(list)
    sizes = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            where = "threads" if row["btl"].startswith("local/") else "processes"
            times[(row["list"], where, row["strategy"])].append(float(row["median_ms"]))
            if row["list"] not in sizes:
                sizes.append(row["list"])
    print("| size | threads (in-process plane) | processes, shm plane ÷ threads | MPI_Allreduce ÷ threads |"
          " memcpy ÷ threads |")
    print("|---|---|---|---|---|")
    for size in sizes:
        def t(where, strategy):
            return statistics.median(times[(size, where, strategy)])
        threads = t("threads", "libddp")
        print(f"| {size} | {threads * 1e3:.1f} µs | {t('processes', 'libddp') / threads:.2f} | "
              f"{t('processes', 'MPI_Allreduce') / threads:.2f} | {t('threads', 'memcpy (floor)') / threads:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
