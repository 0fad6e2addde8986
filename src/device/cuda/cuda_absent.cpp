// cuda.hpp in a libddp built without CUDA (-Dcuda=disabled, or no toolkit
// found): no rank gets a GPU, and anything that would need one says why.
#include "util/pending.hpp"
#include "device/cuda/cuda.hpp"
#include "util/error.hpp"

namespace ddp::cuda {

namespace {
const char* const reason = "this libddp was built without CUDA (rebuild with -Dcuda=enabled and the CUDA toolkit)";

[[noreturn]] void no_cuda() { fail(DDP_ERR_UNSUPPORTED, reason); }
}  // namespace

GpuAssignment assign_gpu(int) { return {-1, reason}; }
GpuAssignment named_gpu(int) { return {-1, reason}; }
void make_current(int) { no_cuda(); }
DeviceScope::DeviceScope(int) { no_cuda(); }
DeviceScope::~DeviceScope() = default;
std::array<uint64_t, 2> device_uuid(int) { no_cuda(); }
void check_stream(void*) { no_cuda(); }

Event::Event() { no_cuda(); }
Event::~Event() = default;
void Event::record(void*) { no_cuda(); }
bool Event::finished() const { no_cuda(); }
void Event::make_wait(void*) const { no_cuda(); }
std::unique_ptr<Pending> pending_until_done(void*) { no_cuda(); }

Stream::Stream() { no_cuda(); }
Stream::~Stream() = default;

KeptBuffer::~KeptBuffer() = default;
std::span<std::byte> KeptBuffer::get(size_t) { no_cuda(); }
void copy_pieces(std::span<const CopyPiece>, void*) { no_cuda(); }

void copy_to_host(void*, const void*, size_t, void*) { no_cuda(); }
void copy_to_device(void*, const void*, size_t, void*) { no_cuda(); }
void divide_on_device(void*, int64_t, ddp_dtype, double, void*) { no_cuda(); }
void load_copy_kernel() { no_cuda(); }
void load_divide_kernels() { no_cuda(); }

}  // namespace ddp::cuda
