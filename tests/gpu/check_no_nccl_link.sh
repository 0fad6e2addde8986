#!/bin/sh
# libddp loads NCCL at run time: the library itself must not depend on it,
# nor on the CUDA runtime's shared library (it links the static one).
set -eu
deps=$(ldd "$1")
if echo "$deps" | grep -E 'libnccl|libcudart' >/dev/null; then
    echo "$1 links NCCL or the shared CUDA runtime:" >&2
    echo "$deps" >&2
    exit 1
fi
echo "$1 loads without NCCL and without libcudart.so:"
echo "$deps"
