// A live process group: the transport (control channel and host data
// planes) and device plane it runs on, in a priority list of planes; the
// control plane that holds every collective to its deadline, the settings resolved at init,
// the scratch buffer and plan cache reused across calls, and the worker
// that runs async requests.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "control/control_plane.hpp"
#include "core/async_worker.hpp"
#include "core/plan_cache.hpp"
#include "core/settings.hpp"
#include "device/cuda/cuda.hpp"
#include "planes/device_plane.hpp"
#include "planes/plane_list.hpp"
#include "planes/transport.hpp"

namespace ddp {

class Communicator {
public:
    /// `device_plane`: nullptr when device buffers are staged through the
    /// host. `name`: a sub-communicator's, for its messages ("" for the world).
    Communicator(std::unique_ptr<Transport> transport, std::unique_ptr<DevicePlane> device_plane,
                 const Settings& settings, cuda::GpuAssignment gpu, std::string name = {});
    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    ControlChannel& channel() { return transport_->channel(); }
    const ControlChannel& channel() const { return transport_->channel(); }
    Transport& transport() { return *transport_; }
    /// The data planes, in the order they are asked.
    const PlaneList& planes() const { return planes_; }
    int rank() const { return channel().rank(); }
    int size() const { return channel().size(); }
    /// "mpi", "self", or "nccl" when a device plane runs beside the transport.
    const char* backend_name() const { return device_plane_ ? device_plane_->name() : transport_->name(); }
    ControlPlane& control() { return control_; }
    /// A sub-communicator's name, as its messages give it; "" for the world.
    const std::string& name() const { return control_.name(); }
    const Settings& settings() const { return settings_; }
    /// The rank's GPU (-1: none) and, without one, why.
    const cuda::GpuAssignment& gpu() const { return gpu_; }
    int device() const { return gpu_.device; }

    /// Runs a collective on the caller's thread after every async request
    /// started earlier has finished, so that ranks see calls in one order.
    /// A second thread entering while one is inside fails at once.
    void run(const std::function<void()>& collective);
    /// Queues a collective for the background worker.
    std::shared_ptr<RequestState> submit(std::function<void()> collective);
    /// Runs a reducer call on the caller's thread (one thread at a time, as
    /// run()); allowed while a reducer step is open, unlike run().
    void run_reducer_call(const std::function<void()>& call);
    /// Waits until every async request started earlier has finished.
    void drain_async() { worker_.drain(); }
    /// Has the worker drive an operation the caller started (a reducer's
    /// bucket), so it progresses while the caller computes.
    std::shared_ptr<RequestState> drive_in_background(std::function<void()> job) {
        return worker_.submit(std::move(job));
    }
    /// The reducer whose step is open (nullptr: none). While one is open, no
    /// other collective, and no other reducer's step, may start: it would
    /// interleave with the bucket reductions.
    const void* reducer_step_owner() const { return reducer_step_owner_; }
    void set_reducer_step_owner(const void* owner) { reducer_step_owner_ = owner; }

    /// A scratch buffer of at least `bytes`, kept between calls.
    std::span<std::byte> fusion_buffer(size_t bytes);
    /// Pinned host memory of at least `bytes` for staging device buffers.
    std::span<std::byte> staging_buffer(size_t bytes) { return staging_.get(bytes); }
    /// A CUDA stream of libddp's own on the communicator's GPU (created on
    /// first use): staged async requests run on it, and NCCL calls given the
    /// per-thread default stream (which NCCL's own threads would take for
    /// theirs).
    void* own_stream();
    PlanCache& plans() { return plans_; }

    /// Waits for async work, then releases the planes; returns in bounded
    /// time even when peers are gone (see ddp_finalize). The world's
    /// finalize releases its live sub-communicators `subs` too: they stop
    /// taking part first (their peers are told), and their planes go once
    /// the world's ranks have all arrived (or were found gone), before MPI
    /// does. Refused, with nothing released, while another thread is inside
    /// a call on any of them.
    void finalize(std::span<Communicator* const> subs = {});

private:
    /// Marks the communicator in use by the calling thread for one entry.
    class Entry;
    /// Whether every rank reaches finalize: waits up to the timeout, or
    /// less after a timeout when a silent peer shows it is gone.
    bool peers_reach_finalize();
    /// Finalize's first step: no async work and no further collective here.
    void stop_taking_part();
    /// Finalize's last step: the timeline file completed, the planes released.
    void release(bool peers_present);

    std::unique_ptr<Transport> transport_;
    std::unique_ptr<DevicePlane> device_plane_;  // after transport_: it uses the transport's channel
    std::vector<std::unique_ptr<HostPlane>> planes_in_front_;  // of the transport's own
    PlaneList planes_;
    Settings settings_;
    ControlPlane control_;
    cuda::GpuAssignment gpu_;
    std::atomic<bool> in_use_{false};
    const void* reducer_step_owner_ = nullptr;  // touched only by the thread holding in_use_
    std::vector<std::byte> buffer_;
    cuda::PinnedBuffer staging_;
    std::unique_ptr<cuda::Stream> own_stream_;
    PlanCache plans_{8};
    AsyncWorker worker_;  // last: its thread stops before the rest goes
};

}  // namespace ddp
