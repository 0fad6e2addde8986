// The CUDA runtime behind cuda.hpp. libddp links the static runtime, which
// loads the driver only when first called: the library loads, and its CPU
// paths run, on machines with no driver and no GPU.
#include <cuda.h>  // context types only: the driver is reached through the runtime
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <utility>
#include <variant>

#include "util/pending.hpp"
#include "device/cuda/cuda.hpp"
#include "device/cuda/cuda_check.hpp"
#include "util/error.hpp"

namespace ddp::cuda {

namespace {

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

std::string error_text(cudaError_t error) {
    return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

// Whether the driver library exists at all (the runtime reports a missing
// driver and an old one alike).
bool driver_installed() {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (driver == nullptr) driver = dlopen("libcuda.so.1", RTLD_LAZY);
    if (driver == nullptr) return false;
    dlclose(driver);
    return true;
}

class EventPending final : public Pending {
public:
    explicit EventPending(void* stream) { event_.record(stream); }
    bool test() override { return event_.finished(); }

private:
    Event event_;
};

}  // namespace

void check(cudaError_t error, const char* what) {
    if (error != cudaSuccess) fail(DDP_ERR_BACKEND, std::string(what) + " failed (" + error_text(error) + ")");
}

namespace {

/// How many GPUs this process sees, or why it sees none.
std::variant<int, GpuAssignment> visible_gpus() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice || (error == cudaSuccess && count == 0)) {
        cudaGetLastError();  // clear the sticky error: the CPU paths go on
        if (error != cudaErrorInsufficientDriver)
            return GpuAssignment{-1, "no GPU is visible to this process (cudaGetDeviceCount found none; check "
                                     "CUDA_VISIBLE_DEVICES)"};
        return GpuAssignment{-1, driver_installed() ? "the NVIDIA driver is older than this libddp's CUDA runtime "
                                                      "needs (" + error_text(error) + ")"
                                                    : "no NVIDIA driver is installed (libcuda.so.1 was not found)"};
    }
    if (error != cudaSuccess) {
        cudaGetLastError();
        return GpuAssignment{-1, "the CUDA runtime could not start (cudaGetDeviceCount: " + error_text(error) + ")"};
    }
    return count;
}

}  // namespace

// Neither makes the GPU current: that creates a CUDA context (GPU memory)
// in every process, also those of a CPU-only job on a GPU node. The nccl
// backend and calls on device buffers make it current when they start.
GpuAssignment assign_gpu(int local_rank) {
    const auto gpus = visible_gpus();
    if (const auto* none = std::get_if<GpuAssignment>(&gpus)) return *none;
    return {local_rank % std::get<int>(gpus), ""};
}

GpuAssignment named_gpu(int device) {
    const auto gpus = visible_gpus();
    if (const auto* none = std::get_if<GpuAssignment>(&gpus)) return *none;
    const int count = std::get<int>(gpus);
    if (device >= count)
        return {-1, "device " + std::to_string(device) + " does not exist: this process sees " +
                        std::to_string(count) + " GPU" + (count == 1 ? "" : "s") + " (check CUDA_VISIBLE_DEVICES)"};
    return {device, ""};
}

void make_current(int device) { check(cudaSetDevice(device), "cudaSetDevice"); }

namespace {

// The driver's context calls, reached through the runtime (libddp links no
// driver library): what the caller's thread had current is a context, or
// none, which cudaGetDevice cannot tell (it answers 0 either way).
struct ContextCalls {
    CUresult (*get)(CUcontext*) = nullptr;
    CUresult (*set)(CUcontext) = nullptr;
};

const ContextCalls& context_calls() {
    static const ContextCalls calls = [] {
        ContextCalls found;
        void* function = nullptr;
        cudaDriverEntryPointQueryResult result{};
        if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &function, 12000, cudaEnableDefault, &result) ==
                cudaSuccess && result == cudaDriverEntryPointSuccess)
            found.get = reinterpret_cast<CUresult (*)(CUcontext*)>(function);
        if (cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &function, 12000, cudaEnableDefault, &result) ==
                cudaSuccess && result == cudaDriverEntryPointSuccess)
            found.set = reinterpret_cast<CUresult (*)(CUcontext)>(function);
        return found;
    }();
    return calls;
}

}  // namespace

DeviceScope::DeviceScope(int device) {
    const ContextCalls& calls = context_calls();
    if (calls.get == nullptr || calls.set == nullptr)
        fail(DDP_ERR_BACKEND, "the CUDA driver has no cuCtxGetCurrent/cuCtxSetCurrent");
    CUcontext current = nullptr;
    calls.get(&current);
    previous_ = current;
    int current_device = -1;
    if (current != nullptr && cudaGetDevice(&current_device) == cudaSuccess && current_device == device) return;
    make_current(device);
    switched_ = true;
}

DeviceScope::~DeviceScope() {
    if (switched_) context_calls().set(static_cast<CUcontext>(previous_));  // none, if the thread had none
}

std::array<uint64_t, 2> device_uuid(int device) {
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
    std::array<uint64_t, 2> words{};
    static_assert(sizeof properties.uuid == sizeof words);
    std::memcpy(words.data(), &properties.uuid, sizeof words);
    return words;
}

void check_stream(void* stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t asked = cudaStreamIsCapturing(as_stream(stream), &capture);
    // The legacy stream while another stream captures: an implicit capture dependency.
    if (asked == cudaErrorStreamCaptureImplicit) capture = cudaStreamCaptureStatusActive;
    else check(asked, "cudaStreamIsCapturing on opts->cuda_stream");
    if (capture != cudaStreamCaptureStatusNone)
        fail(DDP_ERR_UNSUPPORTED,
             "opts->cuda_stream is being captured into a CUDA graph; libddp does not support graph capture in "
             "this version (call it outside the captured region)");
}

namespace {

// The device current where a resource is made (libddp makes it under a
// DeviceScope), so that it is freed there: on a thread with no context the
// runtime would take device 0's, and create it if need be.
int current_device() {
    int device = 0;
    cudaGetDevice(&device);
    return device;
}

template <typename Free>
void free_on(int device, Free free) noexcept {
    try {
        const DeviceScope on_device(device);
        free();
    } catch (const Error&) {
        free();
    }
}

}  // namespace

Event::Event() {
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    event_ = event;
    device_ = current_device();
}

Event::~Event() {
    free_on(device_, [this] { cudaEventDestroy(static_cast<cudaEvent_t>(event_)); });
}

void Event::record(void* stream) {
    check(cudaEventRecord(static_cast<cudaEvent_t>(event_), as_stream(stream)), "cudaEventRecord");
}

namespace {

// A query in CUDA's default (global) capture mode invalidates a graph that
// another thread of the program is capturing (PyTorch does, at any time):
// libddp's queries run in thread-local mode, which only this thread's own
// captures restrict, and the thread's mode is put back after.
class ThreadLocalCapture {
public:
    ThreadLocalCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
    ~ThreadLocalCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
    ThreadLocalCapture(const ThreadLocalCapture&) = delete;
    ThreadLocalCapture& operator=(const ThreadLocalCapture&) = delete;

private:
    cudaStreamCaptureMode mode_ = cudaStreamCaptureModeThreadLocal;
};

// Errors that say a capture forbade the query, not that the work failed.
bool capture_refused(cudaError_t error) {
    return error == cudaErrorStreamCaptureUnsupported || error == cudaErrorStreamCaptureInvalidated ||
           error == cudaErrorStreamCaptureImplicit || error == cudaErrorStreamCaptureWrongThread;
}

}  // namespace

bool Event::finished() const {
    const ThreadLocalCapture mode;
    const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(event_));
    if (state == cudaErrorNotReady || capture_refused(state)) return false;  // asked again on the next poll
    check(state, "the GPU work of this call (cudaEventQuery)");
    return true;
}

void Event::make_wait(void* stream) const {
    check(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(event_), 0), "cudaStreamWaitEvent");
}

std::unique_ptr<Pending> pending_until_done(void* stream) { return std::make_unique<EventPending>(stream); }

Stream::Stream() {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    stream_ = stream;
    device_ = current_device();
}

Stream::~Stream() {
    free_on(device_, [this] { cudaStreamDestroy(as_stream(stream_)); });
}

namespace {

cudaError_t release(KeptBuffer::Kind kind, void* data) {
    return kind == KeptBuffer::Kind::pinned_host ? cudaFreeHost(data) : cudaFree(data);
}

}  // namespace

KeptBuffer::~KeptBuffer() {
    if (data_ != nullptr) free_on(device_, [this] { release(kind_, data_); });
}

std::span<std::byte> KeptBuffer::get(size_t bytes) {
    if (bytes > size_) {
        const bool pinned = kind_ == Kind::pinned_host;
        // Allowed while another thread captures a CUDA graph (as PyTorch does).
        const ThreadLocalCapture capture;
        size_ = 0;
        if (std::byte* old = std::exchange(data_, nullptr))
            check(release(kind_, old), pinned ? "cudaFreeHost" : "cudaFree");
        void* grown = nullptr;
        const cudaError_t error = pinned ? cudaMallocHost(&grown, bytes) : cudaMalloc(&grown, bytes);
        if (error == cudaErrorMemoryAllocation)
            fail(DDP_ERR_OUT_OF_MEMORY, pinned ? "cudaMallocHost of " + std::to_string(bytes) +
                                                     " bytes of pinned staging memory failed"
                                               : "cudaMalloc of " + std::to_string(bytes) +
                                                     " bytes for the buckets of small device tensors failed");
        check(error, pinned ? "cudaMallocHost" : "cudaMalloc");
        data_ = static_cast<std::byte*>(grown);
        size_ = bytes;
        device_ = current_device();
    }
    return {data_, bytes};
}

void copy_to_host(void* host, const void* device, size_t bytes, void* stream) {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), "cudaMemcpyAsync to host");
}

void copy_to_device(void* device, const void* host, size_t bytes, void* stream) {
    if (bytes == 0) return;
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, as_stream(stream)),
          "cudaMemcpyAsync to the device");
}

}  // namespace ddp::cuda
