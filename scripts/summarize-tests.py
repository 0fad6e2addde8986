"""Prints one line 'N passed, N failed' over every suite: Meson's testlogs
(*.json, one JSON object a line; several builds may be given), pytest's junit
files, and the libtest-style lines of cargo and of the Julia suites
(scripts/run-julia-tests; a directory that does not exist, as build/julia where
no julia ran, holds no results).

A result file is named SUITE-npN-rankR.xml (junit) or SUITE-npN-rankR.libtest
(libtest's `test NAME ... ok|FAILED|ignored` lines): a test run under mpirun
counts once, as passed only when it passed on all N ranks; a rank whose file
is missing (it crashed) counts as one failure of its suite, and so does a
libtest file without libtest's closing `test result:` line (the build failed,
or the program died mid-run). Failures of tests run under mpirun are named
on stderr."""
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def meson_results(testlog):
    if not Path(testlog).exists():  # that build failed before it could test
        print(f"{testlog}: missing, counted as one failure", file=sys.stderr)
        yield "FAIL"
        return
    with open(testlog) as log:
        for line in log:
            yield json.loads(line)["result"]


def junit_file(path):
    """{test: result} of one pytest junit file."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            results[name] = "FAIL"
        elif case.find("skipped") is not None:
            results[name] = "SKIP"
        else:
            results[name] = results.get(name, "OK")
    return results


LIBTEST_LINE = re.compile(r"^test (.+) \.\.\. (ok|FAILED|ignored)$")
LIBTEST_RESULTS = {"ok": "OK", "FAILED": "FAIL", "ignored": "SKIP"}


def libtest_file(path):
    """{test: result} of one file of libtest output."""
    results = {}
    finished = False
    for line in path.read_text(errors="replace").splitlines():
        finished = finished or line.startswith("test result:")
        match = LIBTEST_LINE.match(line)
        if match:
            results[match[1]] = LIBTEST_RESULTS[match[2]]
    if not finished:
        results[f"{path.name}: no closing 'test result:' line"] = "FAIL"
    return results


def per_rank_results(directory):
    """One result per (suite, test): 'OK', 'FAIL' or 'SKIP'."""
    suites = defaultdict(dict)  # (suite, ranks) -> {rank: {test: result}}
    for path in Path(directory).glob("*-np*-rank*.*"):
        match = re.fullmatch(r"(.+)-np(\d+)-rank(\d+)\.(xml|libtest)", path.name)
        if not match:
            continue
        suite, ranks, rank, kind = match.groups()
        results = junit_file(path) if kind == "xml" else libtest_file(path)
        suites[(suite, int(ranks))][int(rank)] = results
    for (suite, ranks), by_rank in sorted(suites.items()):
        for test in sorted(set().union(*by_rank.values())):
            outcomes = {by_rank[rank].get(test, "FAIL") for rank in by_rank}
            if "FAIL" in outcomes:
                # a test that ran under another name on some rank (an id
                # that differs between ranks) is missing there: a failure too
                where = sorted(rank for rank in by_rank if by_rank[rank].get(test, "FAIL") == "FAIL")
                print(f"{suite} -np {ranks}: {test} failed or is missing on rank(s) {where}",
                      file=sys.stderr)
            yield "FAIL" if "FAIL" in outcomes else ("SKIP" if outcomes == {"SKIP"} else "OK")
        for missing in set(range(ranks)) - set(by_rank):
            print(f"{suite} -np {ranks}: rank {missing} wrote no results", file=sys.stderr)
            yield "FAIL"


# Arguments: Meson testlogs (*.json) and directories of per-rank result files.
passed = failed = skipped = 0
results = []
for argument in sys.argv[1:]:
    results += list(meson_results(argument) if argument.endswith(".json") else per_rank_results(argument))
for result in results:
    if result in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif result == "SKIP":
        skipped += 1
    else:
        failed += 1
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
