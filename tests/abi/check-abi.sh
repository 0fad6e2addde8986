#!/bin/sh
# Fails when the built library's ABI differs in any way from the committed
# baseline abi/libddp.abi. abidiff's exit status is a bit field (1 error,
# 2 usage, 4 ABI change, 8 incompatible change): every non-zero value fails.
# After a deliberate change: scripts/update-abi-baseline, and commit.
# Usage: check-abi.sh LIBRARY SOURCE_ROOT
set -eu
library=$1 root=$2
current=$(mktemp)
trap 'rm -f "$current"' EXIT
"$root/tests/abi/dump-abi.sh" "$library" "$root/include/ddp" "$current"
status=0
abidiff --harmless "$root/abi/libddp.abi" "$current" || status=$?
if [ "$status" -ne 0 ]; then
    echo "abidiff exit status $status: the ABI differs from abi/libddp.abi (report above)." >&2
    echo "If the change is deliberate: scripts/update-abi-baseline, then commit abi/libddp.abi." >&2
    exit 1
fi
echo "ABI equals abi/libddp.abi"
