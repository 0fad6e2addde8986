"""Checks that src/'s folders include one another in one direction only:
api -> core -> control, planes, trace -> device -> util, as issue 20
asks. The C boundary (api/) reaches the internals through core and never
includes planes/ (start-up chooses and creates the transport in core); no
folder below api/ includes it back, and the control channel knows nothing
of the planes that run beside it. Prints each include that breaks the
direction and exits 1 when there is one.

Usage: check_includes.py SRC_DIR"""
import re
import sys
from pathlib import Path

# Which folders each folder may include (besides itself, ddp/ddp.h and the
# standard library).
MAY_INCLUDE = {
    "api": {"core", "control", "trace", "device", "util"},
    "core": {"control", "planes", "trace", "device", "util"},
    # control keeps the timeline and the flight recorder; trace knows nothing of control.
    "control": {"trace", "device", "util"},
    "planes": {"control", "trace", "device", "util"},
    "trace": {"device", "util"},
    "device": {"util"},
    "util": set(),
}

# Known includes against the direction, each with the reason it is still
# here. One that no longer occurs is reported (remove it from this list),
# not counted as a failure.
KNOWN = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def violations(src):
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".hpp", ".cpp", ".h", ".cu"}:
            continue
        relative = path.relative_to(src).as_posix()
        folder = relative.split("/")[0]
        if folder not in MAY_INCLUDE:
            continue
        for included in INCLUDE.findall(path.read_text(encoding="utf-8")):
            target = included.split("/")[0]
            if "/" not in included or target == folder or target not in MAY_INCLUDE:
                continue  # same folder, ddp/ddp.h, or a file beside it
            if target not in MAY_INCLUDE[folder]:
                yield relative, included


def main():
    src = Path(sys.argv[1])
    found = set(violations(src))
    unexpected = sorted(found - KNOWN.keys())
    for file, included in sorted(KNOWN.keys() - found):
        print(f"note: {file} no longer includes {included}; remove it from KNOWN")
    for file, included in unexpected:
        print(f"src/{file} includes \"{included}\" against the direction "
              "api -> core -> control/planes/trace -> device -> util")
    if unexpected:
        return 1
    print(f"{len(found)} known exception(s); the rest of src/ includes in one direction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
