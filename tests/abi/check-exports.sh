#!/bin/sh
# Fails unless the shared library's dynamic symbol table defines ddp_*
# functions and nothing else (src/libddp.map is what makes it so).
set -eu
library=$1
symbols=$(nm -D --defined-only "$library" | awk '{ print $NF }')
if [ -z "$symbols" ]; then
    echo "nm -D --defined-only $library defines no symbols" >&2
    exit 1
fi
foreign=$(printf '%s\n' "$symbols" | grep -v '^ddp_' || true)
if [ -n "$foreign" ]; then
    echo "$library exports symbols outside ddp_* (see src/libddp.map):" >&2
    printf '%s\n' "$foreign" | c++filt >&2
    exit 1
fi
echo "$(printf '%s\n' "$symbols" | wc -l) symbols, all ddp_*"
