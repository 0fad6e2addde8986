// A live process group: the transport, the settings every collective needs,
// the fusion buffer and plan cache reused across calls, and the worker that
// runs async requests.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "async_worker.hpp"
#include "fusion_plan.hpp"
#include "transport.hpp"

namespace ddp {

class Communicator {
public:
    Communicator(std::unique_ptr<Transport> transport, double timeout_s, int device);
    ~Communicator();
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;

    Transport& transport() { return *transport_; }
    const Transport& transport() const { return *transport_; }
    int device() const { return device_; }
    /// The latest moment peers may arrive for a collective starting now.
    Clock::time_point deadline() const;

    /// Runs a collective on the caller's thread after every async request
    /// started earlier has finished, so that ranks see calls in one order.
    void run_in_order(const std::function<void()>& collective);
    /// Queues a collective for the background worker.
    std::shared_ptr<RequestState> submit(std::function<void()> collective);

    /// A scratch buffer of at least `bytes`, kept between calls.
    std::span<std::byte> fusion_buffer(size_t bytes);
    /// The plan for a list, computed once per distinct call description.
    const FusionPlan& plan(uint64_t description_hash, std::span<const ddp_tensor> tensors,
                           const FusionPolicy& policy);

    /// Waits for async work, then releases the transport.
    void finalize();

private:
    /// Throws DDP_ERR_TIMEOUT once a timeout has left a collective abandoned.
    void require_usable() const;

    std::unique_ptr<Transport> transport_;
    double timeout_s_;
    int device_;
    AsyncWorker worker_;
    std::vector<std::byte> buffer_;
    uint64_t cached_plan_hash_ = 0;
    bool has_cached_plan_ = false;
    FusionPlan cached_plan_;
};

}  // namespace ddp
