// Argument checks for the C boundary. Each throws ddp::Error with
// DDP_ERR_INVALID_ARGUMENT (or DDP_ERR_UNSUPPORTED for device buffers) and a
// message naming the argument and the tensor index.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "ddp/ddp.h"
#include "error.hpp"

namespace ddp {

template <typename T>
T& require_not_null(T* pointer, const char* name) {
    if (pointer == nullptr) fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
    return *pointer;
}

/// A list of `n` tensors named `what` ("tensors", "leaves").
std::span<const ddp_tensor> checked_tensor_list(const ddp_tensor* tensors, int64_t n, const char* what);

/// A valid op; AVG only when every tensor is floating.
ddp_op checked_op(int op, std::span<const ddp_tensor> tensors);

int32_t checked_root(int32_t root, int size);

/// An options struct read the libgit2 way: `defaults` first, then as many
/// bytes of `*opts` as its struct_size says, so that older callers work.
template <typename Options>
Options read_options(const Options* opts, Options defaults, const char* name) {
    if (opts == nullptr) return defaults;
    if (opts->struct_size < sizeof(uint32_t) || opts->struct_size > sizeof(Options))
        fail(DDP_ERR_INVALID_ARGUMENT,
             std::string(name) + "->struct_size is " + std::to_string(opts->struct_size) +
                 " but this libddp's " + name + " has " + std::to_string(sizeof(Options)) +
                 " bytes: fill it with its _init function");
    std::memcpy(&defaults, opts, opts->struct_size);
    return defaults;
}

}  // namespace ddp
