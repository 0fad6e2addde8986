#include "api/validate.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "util/dtype.hpp"

namespace ddp {

namespace {

// "tensors[3]": built only when a check fails, as lists are checked on every call.
std::string tensor_name(const char* what, size_t index) {
    return std::string(what) + "[" + std::to_string(index) + "]";
}

void check_device(const ddp_tensor& tensor, const char* what, size_t index) {
    switch (static_cast<int>(tensor.device_type)) {
    case DDP_DEVICE_CPU:
    case DDP_DEVICE_CUDA_HOST:
    case DDP_DEVICE_CUDA:
        return;
    case DDP_DEVICE_CUDA_MANAGED:
    case DDP_DEVICE_ROCM:
        fail(DDP_ERR_UNSUPPORTED,
             tensor_name(what, index) + " is " + device_type_name(tensor.device_type) +
                 " memory, which this version of libddp does not reduce (host and CUDA device memory only)");
    default:
        fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, index) + ".device_type " +
                                           std::to_string(tensor.device_type) +
                                           " is not a ddp_device_type");
    }
}

}  // namespace

std::span<const ddp_tensor> checked_tensor_list(const ddp_tensor* tensors, int64_t n, const char* what,
                                                DataPointers data) {
    if (n < 0)
        fail(DDP_ERR_INVALID_ARGUMENT,
             "the number of " + std::string(what) + " is " + std::to_string(n) + "; it must be >= 0");
    if (n > 0 && tensors == nullptr)
        fail(DDP_ERR_INVALID_ARGUMENT,
             std::string(what) + " is NULL but its length is " + std::to_string(n));
    std::span<const ddp_tensor> list(tensors, static_cast<size_t>(n));
    for (size_t i = 0; i < list.size(); ++i) {
        const ddp_tensor& tensor = list[i];
        if (!is_valid_dtype(tensor.dtype))
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, i) + ".dtype " +
                                               dtype_name(tensor.dtype) + " is not a ddp_dtype");
        if (tensor.count < 0)
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, i) + ".count is " +
                                               std::to_string(tensor.count) + "; it must be >= 0");
        if (tensor.count > std::numeric_limits<int64_t>::max() / 8)
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, i) + ".count " +
                                               std::to_string(tensor.count) +
                                               " is too large to address in bytes");
        if (data == DataPointers::used && tensor.count > 0 && tensor.data == nullptr)
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, i) + ".data is NULL but its count is " +
                                               std::to_string(tensor.count));
        if (tensor.flags != 0)
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, i) + ".flags is " +
                                               std::to_string(tensor.flags) +
                                               "; it is reserved and must be 0 in this version");
        check_device(tensor, what, i);
    }
    return list;
}

bool checked_list_place(std::span<const ddp_tensor> tensors, const char* what, const cuda::GpuAssignment& gpu) {
    if (tensors.empty()) return false;
    const auto on_device = [](const ddp_tensor& t) { return t.device_type == DDP_DEVICE_CUDA; };
    const bool device = on_device(tensors[0]);
    for (size_t i = 1; i < tensors.size(); ++i)
        if (on_device(tensors[i]) != device)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 tensor_name(what, 0) + " is in " + (device ? "device" : "host") + " memory but " +
                     tensor_name(what, i) + " is in " + (device ? "host" : "device") +
                     " memory; one call takes a list that is all host or all device memory (split it in two calls)");
    if (!device) return false;
    if (gpu.device < 0)
        fail(DDP_ERR_UNSUPPORTED, tensor_name(what, 0) + " is on cuda:" + std::to_string(tensors[0].device_id) +
                                      " but this rank has no GPU: " + gpu.unavailable_reason);
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].device_id != gpu.device)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 tensor_name(what, i) + " is on cuda:" + std::to_string(tensors[i].device_id) +
                     " but this communicator's GPU is cuda:" + std::to_string(gpu.device) +
                     " (ddp_device); move it there, or map ranks to GPUs with CUDA_VISIBLE_DEVICES");
    return true;
}

ddp_op checked_op(int op, std::span<const ddp_tensor> tensors) {
    if (!is_valid_op(op))
        fail(DDP_ERR_INVALID_ARGUMENT, "op " + std::to_string(op) + " is not a ddp_op");
    if (op == DDP_OP_AVG) {
        for (size_t i = 0; i < tensors.size(); ++i)
            if (!is_floating(dtype_of(tensors[i])))
                fail(DDP_ERR_INVALID_ARGUMENT, "op AVG needs floating tensors but tensors[" +
                                                   std::to_string(i) + "] is " +
                                                   dtype_name(tensors[i].dtype) +
                                                   " (use SUM and divide, or convert)");
    }
    return static_cast<ddp_op>(op);
}

int32_t checked_root(int32_t root, int size) {
    if (root < 0 || root >= size)
        fail(DDP_ERR_INVALID_ARGUMENT, "root is " + std::to_string(root) +
                                           "; it must be in [0, " + std::to_string(size) + ")");
    return root;
}

namespace {

struct Extent {
    uintptr_t begin, end;
    size_t index;
};

[[noreturn]] void overlap_error(const char* what, const Extent& a, const Extent& b) {
    const size_t first = std::min(a.index, b.index), second = std::max(a.index, b.index);
    fail(DDP_ERR_INVALID_ARGUMENT, tensor_name(what, first) + " and " + tensor_name(what, second) +
                                       " overlap in memory; a call that writes its tensors needs each byte in "
                                       "one tensor only (pass a buffer once)");
}

}  // namespace

void check_no_overlap(std::span<const ddp_tensor> tensors, const char* what) {
    // Lists mostly come in address order (a model's parameters, views of one
    // buffer): one pass proves those apart without sorting or allocating.
    uintptr_t end = 0;
    bool ordered = true;
    for (const ddp_tensor& tensor : tensors) {
        if (tensor.count == 0) continue;
        const auto begin = reinterpret_cast<uintptr_t>(tensor.data);
        if (begin < end) {
            ordered = false;
            break;
        }
        end = begin + byte_size(tensor);
    }
    if (ordered) return;
    std::vector<Extent> extents;
    extents.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        const ddp_tensor& tensor = tensors[i];
        if (tensor.count == 0) continue;
        const auto begin = reinterpret_cast<uintptr_t>(tensor.data);
        extents.push_back(Extent{begin, begin + byte_size(tensor), i});
    }
    std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < extents.size(); ++i)
        if (extents[i].begin < extents[i - 1].end) overlap_error(what, extents[i - 1], extents[i]);
}

namespace {

// The count inputs[i] needs its output to have, or why it has none.
int64_t expected_output_count(const ddp_tensor& input, size_t i, Sharding sharding, int size,
                              const std::string& collective) {
    if (sharding == Sharding::gather) {
        if (input.count > std::numeric_limits<int64_t>::max() / 8 / size)
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name("inputs", i) + ".count " + std::to_string(input.count) +
                                               " gathered from " + std::to_string(size) +
                                               " ranks is too large to address in bytes");
        return input.count * size;
    }
    const bool scatter = sharding == Sharding::scatter;
    if (input.count % size != 0)
        fail(DDP_ERR_INVALID_ARGUMENT,
             tensor_name("inputs", i) + ".count is " + std::to_string(input.count) + ", not a multiple of the " +
                 std::to_string(size) + " ranks " + collective +
                 (scatter ? " shares it between (each rank gets an equal shard: "
                          : " sends its blocks to (each rank gets an equal block: ") +
                 "pad it to " + std::to_string((input.count / size + 1) * size) + " elements)");
    if (input.count / size > max_shard_elements)
        fail(DDP_ERR_UNSUPPORTED, tensor_name("inputs", i) + ": " + (scatter ? "a " : "an ") + collective +
                                      (scatter ? " shard" : " block") + " of " + std::to_string(input.count / size) + " elements is more than this version "
                                      "moves in one step (" + std::to_string(max_shard_elements) +
                                      "); split the tensor");
    return scatter ? input.count / size : input.count;
}

// Refuses an input that overlaps an output, but for a gathered input
// that is exactly its own block of its own output.
void check_inputs_apart(std::span<const ddp_tensor> inputs, std::span<const ddp_tensor> outputs, Sharding sharding,
                        int rank, const std::string& collective) {
    std::vector<Extent> extents;  // the outputs', disjoint (checked before)
    for (size_t i = 0; i < outputs.size(); ++i) {
        if (outputs[i].count == 0) continue;
        const auto begin = reinterpret_cast<uintptr_t>(outputs[i].data);
        extents.push_back({begin, begin + byte_size(outputs[i]), i});
    }
    std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].count == 0) continue;
        const auto begin = reinterpret_cast<uintptr_t>(inputs[i].data), end = begin + byte_size(inputs[i]);
        // The last output starting before the input ends is the only one that can overlap it.
        auto after = std::upper_bound(extents.begin(), extents.end(), end - 1,
                                      [](uintptr_t address, const Extent& e) { return address < e.begin; });
        if (after == extents.begin() || std::prev(after)->end <= begin) continue;
        const Extent& output = *std::prev(after);
        const bool own_block = sharding == Sharding::gather && output.index == i &&
                               begin == output.begin + static_cast<uintptr_t>(rank) * byte_size(inputs[i]);
        if (own_block) continue;
        fail(DDP_ERR_INVALID_ARGUMENT,
             tensor_name("inputs", i) + " overlaps " + tensor_name("outputs", output.index) + " in memory; " +
                 (sharding == Sharding::gather
                      ? "an " + collective + " input may only be its own rank's block of its output (in place)"
                      : collective + "'s inputs and outputs must be apart"));
    }
}

}  // namespace

std::span<const ddp_tensor> checked_outputs(std::span<const ddp_tensor> inputs, const ddp_tensor* outputs,
                                            Sharding sharding, int size, int rank, const char* collective) {
    const std::span<const ddp_tensor> list =
        checked_tensor_list(outputs, static_cast<int64_t>(inputs.size()), "outputs");
    for (size_t i = 0; i < list.size(); ++i) {
        const ddp_tensor &input = inputs[i], &output = list[i];
        if (output.dtype != input.dtype)
            fail(DDP_ERR_INVALID_ARGUMENT, tensor_name("outputs", i) + ".dtype is " + dtype_name(output.dtype) +
                                               " but " + tensor_name("inputs", i) + ".dtype is " +
                                               dtype_name(input.dtype));
        if ((output.device_type == DDP_DEVICE_CUDA) != (input.device_type == DDP_DEVICE_CUDA))
            fail(DDP_ERR_INVALID_ARGUMENT,
                 tensor_name("outputs", i) + " is in " + (output.device_type == DDP_DEVICE_CUDA ? "device" : "host") +
                     " memory but " + tensor_name("inputs", i) + " is not; both lists are in one kind of memory");
        const int64_t expected = expected_output_count(input, i, sharding, size, collective);
        if (output.count != expected)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 tensor_name("outputs", i) + ".count is " + std::to_string(output.count) + " but " + collective +
                     " on " + std::to_string(size) + " ranks needs " +
                     (sharding == Sharding::gather ? std::to_string(size) + " × " : std::string()) +
                     tensor_name("inputs", i) + ".count" +
                     (sharding == Sharding::scatter ? " / " + std::to_string(size) : std::string()) + " = " +
                     std::to_string(expected));
    }
    check_no_overlap(list, "outputs");
    check_inputs_apart(inputs, list, sharding, rank, collective);
    return list;
}

}  // namespace ddp
