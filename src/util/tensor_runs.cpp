#include "util/tensor_runs.hpp"

#include <cstddef>

#include "util/dtype.hpp"

namespace ddp {

std::vector<ddp_tensor> merged_runs(std::span<const ddp_tensor> tensors) {
    std::vector<ddp_tensor> runs;
    for (const ddp_tensor& tensor : tensors) {
        if (tensor.count == 0) continue;
        if (!runs.empty()) {
            ddp_tensor& last = runs.back();
            const bool adjacent = static_cast<const std::byte*>(last.data) + byte_size(last) == tensor.data;
            if (adjacent && last.dtype == tensor.dtype && last.device_type == tensor.device_type &&
                last.device_id == tensor.device_id) {
                last.count += tensor.count;
                continue;
            }
        }
        runs.push_back(tensor);
    }
    return runs;
}

}  // namespace ddp
