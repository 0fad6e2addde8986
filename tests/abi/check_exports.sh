#!/bin/sh
# Passes when libddp exports only ddp_* symbols (src/libddp.map), and all of
# the header's DDP_API functions are among them.
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '{print $3}')
stray=$(echo "$exported" | grep -v '^ddp_')
if [ -n "$stray" ]; then
    echo "exported besides ddp_*:"; echo "$stray"; exit 1
fi
missing=0
for name in $(grep -o 'DDP_API [^;(]*(' "$header" | grep -o 'ddp_[a-z_0-9]*(' | tr -d '('); do
    echo "$exported" | grep -qx "$name" || { echo "declared but not exported: $name"; missing=1; }
done
[ $missing -eq 0 ] && echo "$(echo "$exported" | wc -l) symbols, all ddp_*"
exit $missing
