#include "planes/shm/stream_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ddp::shm {

#if defined(__x86_64__)

// SSE2 (every x86-64 CPU): the CPU's write-combining buffers merge 16-byte
// streaming stores into whole lines, so wider registers gain nothing here.
void stream_copy(void* dst, const void* src, size_t bytes) {
    auto* out = static_cast<std::byte*>(dst);
    const auto* in = static_cast<const std::byte*>(src);
    const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(out) % 16) % 16);
    std::memcpy(out, in, head);
    out += head, in += head, bytes -= head;
    const size_t body = bytes / 16;
    for (size_t i = 0; i < body; ++i)
        _mm_stream_si128(reinterpret_cast<__m128i*>(out) + i, _mm_loadu_si128(reinterpret_cast<const __m128i*>(in) + i));
    std::memcpy(out + body * 16, in + body * 16, bytes - body * 16);
    _mm_sfence();  // streaming stores are weakly ordered: fence before the flag
}

#else

void stream_copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

#endif

}  // namespace ddp::shm
