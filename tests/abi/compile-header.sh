#!/bin/sh
# Compiles a translation unit that includes nothing but ddp/ddp.h, with
# every warning an error: the header must stand alone in each C and C++
# standard a user may build with (libgit2's header test).
# Usage: compile-header.sh INCLUDE_DIR c|c++ STANDARD [EXTRA_FLAG...] -- COMPILER...
set -eu
include_dir=$1 language=$2 standard=$3
shift 3
extra=""
while [ "$1" != "--" ]; do extra="$extra $1"; shift; done
shift
unit=$(mktemp -d)
trap 'rm -rf "$unit"' EXIT
suffix=c
[ "$language" = c ] || suffix=cpp
printf '#include <ddp/ddp.h>\n' > "$unit/header.$suffix"
set -x
# shellcheck disable=SC2086 # extra holds separate flags
"$@" -x "$language" -std="$standard" -Wall -Wextra -pedantic -Werror $extra \
    -I "$include_dir" -c "$unit/header.$suffix" -o "$unit/header.o"
