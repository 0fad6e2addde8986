// A live process group: the transport (control channel and host data
// planes) and device plane it runs on, in a priority list of planes; the
// control plane that holds every collective to its deadline, the agreement
// each call starts with, the trace of its calls, the settings resolved at init,
// the memory and plan cache reused across calls, and the worker
// that runs async requests.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/agreement.hpp"
#include "control/control_plane.hpp"
#include "core/async_worker.hpp"
#include "core/call_memory.hpp"
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
    /// Its timeline and flight recorder.
    trace::CallTrace& trace() { return trace_; }
    /// How its ranks agree on each call, and the word a round carries.
    Agreement& agreement() { return agreement_; }
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
    /// Runs `call` on the caller's thread, one thread at a time as run(), but
    /// outside the collectives' order: it neither waits for earlier async
    /// requests nor is refused while an exclusive span is open. For the calls
    /// of a multi-call operation that continue its span (they check that they
    /// hold it) and for calls that start no collective.
    void run_unordered(const std::function<void()>& call);
    /// Waits until every async request started earlier has finished.
    void drain_async() { worker_.drain(); }
    /// The background thread of async requests; a multi-call operation may
    /// also have it drive what it started (a reducer's bucket reductions), so
    /// that they progress while the caller computes.
    AsyncWorker& worker() { return worker_; }

    /// What a multi-call operation (a reducer's step) holds while no other
    /// collective may start on the communicator: it would interleave with
    /// the operation's transfers. run() and submit() refuse meanwhile, with
    /// `refusal` (a literal) as the error message. The span closes when its
    /// last holder lets it go, which is safe after the communicator is gone.
    struct ExclusiveSpan {
        std::string_view refusal;
    };
    /// Opens an exclusive span; the caller checks exclusive_span_open() first.
    [[nodiscard]] std::shared_ptr<const ExclusiveSpan> open_exclusive_span(std::string_view refusal);
    bool exclusive_span_open() const { return !exclusive_span_.expired(); }

    /// What its calls reuse: the fusion buffer, staging memory, its own stream.
    CallMemory& memory() { return memory_; }
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
    /// Fails with the open exclusive span's refusal, if one is open.
    void refuse_during_exclusive_span() const;
    /// Finalize's first step: no async work and no further collective here.
    void stop_taking_part();
    /// Finalize's last step: the timeline file completed, the planes released.
    void release(bool peers_present);

    std::unique_ptr<Transport> transport_;
    std::unique_ptr<DevicePlane> device_plane_;  // after transport_: it uses the transport's channel
    std::vector<std::unique_ptr<HostPlane>> planes_in_front_;  // of the transport's own
    PlaneList planes_;
    Settings settings_;
    trace::CallTrace trace_;  // before control_ and agreement_, which record into it
    ControlPlane control_;
    Agreement agreement_;
    cuda::GpuAssignment gpu_;
    std::atomic<bool> in_use_{false};
    std::weak_ptr<const ExclusiveSpan> exclusive_span_;  // touched only by the thread holding in_use_
    CallMemory memory_;
    PlanCache plans_{8};
    AsyncWorker worker_;  // last: its thread stops before the rest goes
};

}  // namespace ddp
