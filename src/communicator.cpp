#include "communicator.hpp"

#include "error.hpp"

namespace ddp {

Communicator::Communicator(std::unique_ptr<Transport> transport, double timeout_s, int device)
    : transport_(std::move(transport)), timeout_s_(timeout_s), device_(device) {}

Communicator::~Communicator() = default;

Clock::time_point Communicator::deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeout_s_));
}

void Communicator::require_usable() const {
    if (transport_->broken())
        fail(DDP_ERR_TIMEOUT, "the communicator timed out in an earlier collective and is unusable; "
                              "finalize it and end the job");
}

void Communicator::run_in_order(const std::function<void()>& collective) {
    worker_.drain();
    require_usable();
    collective();
}

std::shared_ptr<RequestState> Communicator::submit(std::function<void()> collective) {
    require_usable();
    if (!transport_->allows_background_thread())
        fail(DDP_ERR_UNSUPPORTED,
             "async collectives need MPI_THREAD_SERIALIZED or better, but MPI was initialized "
             "with a lower thread level (initialize MPI with MPI_Init_thread, or let libddp do it)");
    return worker_.submit(std::move(collective));
}

std::span<std::byte> Communicator::fusion_buffer(size_t bytes) {
    if (buffer_.size() < bytes) buffer_.resize(bytes);
    return {buffer_.data(), bytes};
}

const FusionPlan& Communicator::plan(uint64_t description_hash, std::span<const ddp_tensor> tensors,
                                     const FusionPolicy& policy) {
    if (!has_cached_plan_ || cached_plan_hash_ != description_hash) {
        cached_plan_ = plan_fusion(tensors, policy);
        cached_plan_hash_ = description_hash;
        has_cached_plan_ = true;
    }
    return cached_plan_;
}

void Communicator::finalize() {
    worker_.stop();
    transport_->finalize();
}

}  // namespace ddp
