#!/bin/sh
# Writes libddp's ABI as libabigail XML: the exported functions and the
# types that include/ddp declares (--headers-dir, --exported-interfaces-only,
# --drop-private-types), without paths, source locations, parameter names or
# DT_NEEDED, and with content-hashed type ids, so that the dump changes only
# when the ABI does (not when src/ files move or a build dir is renamed).
# Usage: dump-abi.sh LIBRARY HEADERS_DIR OUTPUT
set -eu
abidw --headers-dir "$2" --exported-interfaces-only --drop-private-types --drop-undefined-syms \
    --no-corpus-path --no-comp-dir-path --no-show-locs --no-parameter-names --no-elf-needed \
    --type-id-style hash --out-file "$3.tmp" "$1"
# The translation unit's source path (../src/api.cpp) is where the build
# happened, not ABI.
sed "s|^\(  <abi-instr [^>]*\) path='[^']*'|\1|" "$3.tmp" > "$3"
rm -f "$3.tmp"
