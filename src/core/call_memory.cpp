#include "core/call_memory.hpp"

namespace ddp {

std::span<std::byte> CallMemory::fusion_buffer(size_t bytes) {
    if (fusion_.size() < bytes) fusion_.resize(bytes);
    return {fusion_.data(), bytes};
}

void* CallMemory::own_stream() {
    if (!own_stream_) own_stream_ = std::make_unique<cuda::Stream>();
    return own_stream_->get();
}

}  // namespace ddp
