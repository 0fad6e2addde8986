#!/bin/sh
# Compiles include/ddp/ddp.h alone (libgit2's header test) with one
# language standard and -Wall -Wextra -pedantic -Werror; extra arguments
# (e.g. -DDDP_EXPERIMENTAL_API) are passed on.
compiler=$1 standard=$2 include=$3 language=$4
shift 4
printf '#include <ddp/ddp.h>\nint main(void) { return (int)ddp_version() == 0; }\n' |
    "$compiler" -x "$language" -std="$standard" -Wall -Wextra -pedantic -Werror "$@" -I"$include" -fsyntax-only -
