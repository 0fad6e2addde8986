// What libddp needs from the CUDA runtime, behind an interface without CUDA
// types (streams are void*, as in ddp.h), so that the code outside this
// folder compiles whether or not libddp is built with CUDA. The CUDA build
// implements it in cuda_runtime.cpp (and scale.cu); a build without CUDA in
// cuda_absent.cpp, where everything that needs a GPU says so.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ddp/ddp.h"

namespace ddp {

class Pending;

namespace cuda {

/// The GPU a rank was given at ddp_init, or why it has none.
struct GpuAssignment {
    int device = -1;
    /// Empty when `device` >= 0; else the exact reason (built without CUDA,
    /// no driver, no GPU), quoted in every error about device buffers.
    std::string unavailable_reason;
};

/// GPU `local_rank % gpu_count` (FluxMPI's round robin).
GpuAssignment assign_gpu(int local_rank);
/// GPU `device` (>= 0), where this process sees it.
GpuAssignment named_gpu(int device);

/// Makes `device` current on the calling thread (for libddp's own threads).
void make_current(int device);

/// Makes `device` current for a scope on the caller's thread and then puts
/// back the CUDA context the thread had (or none), so that a call leaves
/// the thread as it was and creates no context on another GPU.
class DeviceScope {
public:
    explicit DeviceScope(int device);
    ~DeviceScope();
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    void* previous_ = nullptr;  ///< the thread's CUcontext before (nullptr: none)
    bool switched_ = false;
};

/// Whether `stream` is CUDA's per-thread default stream (cudaStreamPerThread,
/// DDP_CUDA_STREAM_PER_THREAD), which names another stream on each thread.
inline bool is_per_thread(void* stream) { return stream == reinterpret_cast<void*>(DDP_CUDA_STREAM_PER_THREAD); }

/// The device's UUID as two words (to find ranks that share a GPU).
std::array<uint64_t, 2> device_uuid(int device);

/// The caller's stream as given in ddp_collective_options; throws
/// DDP_ERR_UNSUPPORTED when it is being captured into a CUDA graph.
void check_stream(void* stream);

/// A CUDA event, recorded on a stream to learn when the work before it ends.
class Event {
public:
    Event();
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    void record(void* stream);
    /// Whether the work before the record has finished; throws
    /// DDP_ERR_BACKEND with the CUDA error when that work failed.
    bool finished() const;
    /// Makes `stream` wait for it without blocking the host.
    void make_wait(void* stream) const;

private:
    void* event_ = nullptr;
    int device_ = 0;  ///< where it was made: freed there
};

/// A Pending that finishes when the event recorded on `stream` now does,
/// so that the control plane holds the GPU's work to the call's deadline.
std::unique_ptr<Pending> pending_until_done(void* stream);

/// A stream of libddp's own on the current device (the async worker's).
class Stream {
public:
    Stream();
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    void* get() const { return stream_; }

private:
    void* stream_ = nullptr;
    int device_ = 0;  ///< where it was made: freed there
};

/// Memory that grows on demand and is kept between calls: page-locked host
/// memory (the staging area of device buffers on the mpi backend) or device
/// memory (the buckets of small device tensors on the nccl backend).
/// Growing frees the old memory first, which waits for the device's work on
/// it to end.
class KeptBuffer {
public:
    enum class Kind { pinned_host, device };
    explicit KeptBuffer(Kind kind) : kind_(kind) {}
    ~KeptBuffer();
    KeptBuffer(const KeptBuffer&) = delete;
    KeptBuffer& operator=(const KeptBuffer&) = delete;
    std::span<std::byte> get(size_t bytes);

private:
    const Kind kind_;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
    int device_ = 0;  ///< where it was allocated: freed there
};

/// One copy between device buffers.
struct CopyPiece {
    const void* from;
    void* to;
    size_t bytes;
};

/// Every piece copied on `stream`, by one kernel per 64 pieces (a
/// cudaMemcpyAsync each would cost a launch per tensor).
void copy_pieces(std::span<const CopyPiece> pieces, void* stream);

/// Asynchronous copies on `stream` (device to host, host to device).
void copy_to_host(void* host, const void* device, size_t bytes, void* stream);
void copy_to_device(void* device, const void* host, size_t bytes, void* stream);

/// Divides `count` floating elements on the device by `divisor` on `stream`
/// (AVG after an NCCL SUM), computing as the CPU path does: in single
/// precision for f16, bf16 and f32, in double for f64, rounding once.
void divide_on_device(void* data, int64_t count, ddp_dtype dtype, double divisor, void* stream);

/// Loads the copy and division kernels onto the current device now. CUDA
/// loads a kernel at its first launch, and a load waits for the kernels
/// running on the device: after an NCCL launch whose kernel waits for
/// another rank of this process on the same device, it would never end.
void load_copy_kernel();
void load_divide_kernels();

}  // namespace cuda
}  // namespace ddp
