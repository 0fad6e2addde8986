"""Prints one line 'N passed, N failed' over every suite: Meson's testlog.json
files (one JSON object a line; the main build and the sanitizer builds) and
pytest's junit files. Arguments ending in .json are Meson logs, the others
pytest junit directories; a Meson log that is missing (its build failed)
counts as one failure.

A junit file is named SUITE-npN-rankR.xml: a pytest test run under mpirun
counts once, as passed only when it passed on all N ranks; a rank whose file
is missing (it crashed) counts as one failure of its suite."""
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def meson_results(testlog):
    if not Path(testlog).exists():
        print(f"{testlog} is missing: its build or test run did not finish", file=sys.stderr)
        yield "FAIL"
        return
    with open(testlog) as log:
        for line in log:
            yield json.loads(line)["result"]


def pytest_results(directory):
    """One result per (suite, test): 'OK', 'FAIL' or 'SKIP'."""
    suites = defaultdict(dict)  # (suite, ranks) -> {rank: {test: result}}
    for path in Path(directory).glob("*-np*-rank*.xml"):
        suite, ranks, rank = re.fullmatch(r"(.+)-np(\d+)-rank(\d+)\.xml", path.name).groups()
        results = {}
        for case in ET.parse(path).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                results[name] = "FAIL"
            elif case.find("skipped") is not None:
                results[name] = "SKIP"
            else:
                results[name] = results.get(name, "OK")
        suites[(suite, int(ranks))][int(rank)] = results
    for (suite, ranks), by_rank in sorted(suites.items()):
        for test in sorted(set().union(*by_rank.values())):
            outcomes = {by_rank[rank].get(test, "FAIL") for rank in by_rank}
            yield "FAIL" if "FAIL" in outcomes else ("SKIP" if outcomes == {"SKIP"} else "OK")
        for missing in set(range(ranks)) - set(by_rank):
            print(f"{suite} -np {ranks}: rank {missing} wrote no results", file=sys.stderr)
            yield "FAIL"


passed = failed = skipped = 0
results = []
for argument in sys.argv[1:]:
    results += list(meson_results(argument) if argument.endswith(".json") else pytest_results(argument))
for result in results:
    if result in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif result == "SKIP":
        skipped += 1
    else:
        failed += 1
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
