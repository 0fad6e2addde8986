#!/bin/sh
# Installs the build into a scratch prefix, then compiles and runs
# consumer.c with exactly what `pkg-config --cflags --libs ddp` says, and
# checks that no MPI flags leak into it.
#   check_installed.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
source=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

meson install -C "$build" --destdir "$scratch" --quiet
prefix=$(meson introspect "$build" --buildoptions |
         python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
pcdir=$(dirname "$(find "$scratch" -name ddp.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$scratch$prefix" --cflags --libs ddp)
echo "pkg-config --cflags --libs ddp: $flags"

for flag in $flags; do
    case "$flag" in
        -I*|-L*|-lddp) ;;
        *) echo "unexpected flag in ddp.pc: $flag" >&2; exit 1 ;;
    esac
done
case "$flags" in
    *mpi*|*MPI*) echo "MPI flags leak into ddp.pc: $flags" >&2; exit 1 ;;
esac

# shellcheck disable=SC2086 # the flags are words
cc -std=c99 -Wall -Werror -o "$scratch/consumer" "$source/pkgconfig/consumer.c" $flags
libdir=$(echo "$flags" | tr ' ' '\n' | sed -n 's/^-L//p')
env -u OMPI_COMM_WORLD_SIZE LD_LIBRARY_PATH="$libdir" "$scratch/consumer"
readelf -d "$libdir/libddp.so" | grep -q 'SONAME.*libddp.so.0' || { echo "SONAME is not libddp.so.0" >&2; exit 1; }
# Only the DDP_API functions are exported.
others=$(nm -D --defined-only "$libdir/libddp.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^ddp_/ {print $3}')
[ -z "$others" ] || { echo "libddp.so exports non-ddp symbols: $others" >&2; exit 1; }
echo "exports: $(nm -D --defined-only "$libdir/libddp.so" | awk '$3 ~ /^ddp_/' | wc -l) ddp_ functions, nothing else"
