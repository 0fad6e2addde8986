#!/bin/sh
# Compares the built library's ABI with the committed baseline
# (abi/libddp.abi) through libabigail. abidiff's exit status is a bit field:
# every non-zero value is a difference or an error, and fails the test.
# The experimental tier is outside the promise (abi/suppressions).
lib=$1 root=$2
current=$(mktemp)
trap 'rm -f "$current"' EXIT
"$root/abi/dump" "$lib" "$current" || exit 1
abidiff --suppressions "$root/abi/suppressions" "$root/abi/libddp.abi" "$current"
status=$?
if [ $status -ne 0 ]; then
    echo "the ABI differs from abi/libddp.abi (abidiff status $status);"
    echo "if the change is deliberate, run scripts/update-abi-baseline and commit"
    exit 1
fi
echo "ABI equal to abi/libddp.abi"
