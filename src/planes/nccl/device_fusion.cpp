#include "planes/nccl/device_fusion.hpp"

#include <cstddef>
#include <map>

#include "util/dtype.hpp"

namespace ddp {

namespace {

constexpr size_t small_bytes = size_t{1} << 20;
constexpr size_t bucket_bytes = size_t{64} << 20;  // the buffer's largest size: later small tensors go as they are
constexpr size_t alignment = 16;                   // every dtype's, and the copy kernel's vector width

size_t aligned(size_t offset) { return (offset + alignment - 1) / alignment * alignment; }

}  // namespace

std::vector<ddp_tensor> DeviceFusion::pack(std::span<const ddp_tensor> tensors, void* stream) {
    packed_.clear();
    std::vector<ddp_tensor> to_reduce;
    std::map<int32_t, std::vector<const ddp_tensor*>> small;  // by dtype, in list order
    size_t total = 0;
    for (const ddp_tensor& tensor : tensors) {
        const size_t bytes = byte_size(tensor);
        if (bytes == 0) continue;
        if (bytes < small_bytes && total + aligned(bytes) <= bucket_bytes) {
            small[tensor.dtype].push_back(&tensor);
            total += aligned(bytes);
        } else {
            to_reduce.push_back(tensor);
        }
    }
    for (auto dtype = small.begin(); dtype != small.end();) {  // one small tensor of a dtype: as it is
        if (dtype->second.size() > 1) {
            ++dtype;
            continue;
        }
        to_reduce.push_back(*dtype->second.front());
        total -= aligned(byte_size(*dtype->second.front()));
        dtype = small.erase(dtype);
    }
    if (small.empty()) return to_reduce;
    if (unpacked_) unpacked_->make_wait(stream);  // the last call's unpack, on whatever stream it ran
    std::byte* bucket = buffer_.get(total).data();
    for (const auto& [dtype, members] : small) {
        ddp_tensor whole = *members.front();
        whole.data = bucket;
        for (const ddp_tensor* member : members) {
            const size_t bytes = byte_size(*member);
            packed_.push_back(Member{member->data, bucket, bytes});
            // Each member starts 16-byte aligned: the gaps travel with the bucket, reduced and thrown away.
            bucket += aligned(bytes);
        }
        const auto bucket_size = static_cast<size_t>(bucket - static_cast<std::byte*>(whole.data));
        whole.count = static_cast<int64_t>(bucket_size / element_size(dtype_of(whole)));
        to_reduce.push_back(whole);
    }
    cuda::copy_pieces(copies(true), stream);
    return to_reduce;
}

std::vector<cuda::CopyPiece> DeviceFusion::copies(bool into_bucket) const {
    std::vector<cuda::CopyPiece> pieces;
    pieces.reserve(packed_.size());
    for (const Member& member : packed_)
        pieces.push_back(into_bucket ? cuda::CopyPiece{member.tensor, member.in_bucket, member.bytes}
                                     : cuda::CopyPiece{member.in_bucket, member.tensor, member.bytes});
    return pieces;
}

void DeviceFusion::unpack(void* stream) {
    if (packed_.empty()) return;
    cuda::copy_pieces(copies(false), stream);
    if (!unpacked_) unpacked_.emplace();
    unpacked_->record(stream);
    packed_.clear();
}

}  // namespace ddp
