// Argument checks for the C boundary. Each throws ddp::Error with
// DDP_ERR_INVALID_ARGUMENT (or DDP_ERR_UNSUPPORTED for memory no GPU here can reduce) and a
// message naming the argument and the tensor index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/collectives/takes.hpp"
#include "ddp/ddp.h"
#include "device/cuda/cuda.hpp"
#include "util/error.hpp"

namespace ddp {

template <typename T>
T& require_not_null(T* pointer, const char* name) {
    if (pointer == nullptr) fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
    return *pointer;
}

/// Whether a list's data pointers matter (a reducer's registration uses
/// only dtypes and counts).
enum class DataPointers { used, ignored };

/// A list of `n` tensors named `what` ("tensors", "leaves").
std::span<const ddp_tensor> checked_tensor_list(const ddp_tensor* tensors, int64_t n, const char* what,
                                                DataPointers data = DataPointers::used);

/// Whether a checked list is in device memory: all of it on the
/// communicator's GPU, or all in host memory (DDP_ERR_INVALID_ARGUMENT
/// otherwise; DDP_ERR_UNSUPPORTED with the reason when the rank has no GPU).
bool checked_list_place(std::span<const ddp_tensor> tensors, const char* what, const cuda::GpuAssignment& gpu);

/// A valid op; AVG only when every tensor is floating.
ddp_op checked_op(int op, std::span<const ddp_tensor> tensors);

int32_t checked_root(int32_t root, int size);

/// Refuses a list in which two tensors share memory, for calls that write
/// into the tensors (the same buffer twice would be reduced twice). O(n)
/// when the tensors are in address order, as views of one buffer are;
/// O(n log n) otherwise.
void check_no_overlap(std::span<const ddp_tensor> tensors, const char* what);

/// The outputs of `collective` (its name, for messages) for the checked
/// `inputs`: one per input, of its dtype and memory, sized as `sharding`
/// says for `size` ranks, and writable: overlapping no other output and no
/// input, except that a gathered input may be exactly its own block of its
/// output (rank × its bytes in: in place). An input that a scatter or an
/// exchange cuts into `size` parts must be a multiple of `size`; it is
/// refused naming the tensor.
std::span<const ddp_tensor> checked_outputs(std::span<const ddp_tensor> inputs, const ddp_tensor* outputs,
                                            Sharding sharding, int size, int rank, const char* collective);

/// The sizes of an options struct's released layouts, oldest first: the
/// struct_size values a caller may pass. Fields after the caller's layout
/// are defaulted for callers compiled against an older header; a size
/// between layouts would cut a field in two, so it is refused.
template <typename Options>
std::vector<size_t> released_sizes() {
    return {sizeof(Options)};
}
template <>
inline std::vector<size_t> released_sizes<ddp_init_options>() {
    // 0.1: up to timeout_s; 1.2: + hang_watchdog_s.
    return {offsetof(ddp_init_options, hang_watchdog_s), sizeof(ddp_init_options)};
}
template <>
inline std::vector<size_t> released_sizes<ddp_collective_options>() {
    // 0.1: {struct_size, fusion_bytes}; 1.0: + timeout_s; 1.1: + cuda_stream; 1.2: + names;
    // 1.3: + for_binding.
    return {offsetof(ddp_collective_options, timeout_s), offsetof(ddp_collective_options, cuda_stream),
            offsetof(ddp_collective_options, names), offsetof(ddp_collective_options, for_binding),
            sizeof(ddp_collective_options)};
}

template <typename Options>
void check_struct_size(uint32_t struct_size, const std::string& what) {
    const std::vector<size_t> sizes = released_sizes<Options>();
    if (std::find(sizes.begin(), sizes.end(), struct_size) != sizes.end()) return;
    std::string accepted;
    for (size_t size : sizes) accepted += (accepted.empty() ? "" : ", ") + std::to_string(size);
    fail(DDP_ERR_INVALID_ARGUMENT,
         what + " is " + std::to_string(struct_size) + " but this libddp accepts " + accepted +
             " bytes (fill the struct with its _init function and sizeof; a larger size means "
             "the program was built against a newer ddp.h than this library)");
}

/// Writes the defaults into the first `struct_size` bytes of the caller's
/// struct and never past them (libgit2's _init(opts, VERSION) contract).
template <typename Options>
void init_options(Options* opts, uint32_t struct_size, Options defaults, const char* name) {
    require_not_null(opts, name);
    check_struct_size<Options>(struct_size, "struct_size");
    defaults.struct_size = struct_size;
    std::memcpy(static_cast<void*>(opts), &defaults, struct_size);
}

/// An options struct read the libgit2 way: `defaults` first, then as many
/// bytes of `*opts` as its struct_size says, so that older callers work.
template <typename Options>
Options read_options(const Options* opts, Options defaults, const char* name) {
    if (opts == nullptr) return defaults;
    check_struct_size<Options>(opts->struct_size, std::string(name) + "->struct_size");
    std::memcpy(static_cast<void*>(&defaults), opts, opts->struct_size);
    return defaults;
}

}  // namespace ddp
