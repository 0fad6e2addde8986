#include "core/communicator.hpp"


#include "control/finalize_barrier.hpp"
#include "planes/planes_in_front.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

class Communicator::Entry {
public:
    explicit Entry(std::atomic<bool>& in_use) : in_use_(in_use) {
        if (in_use_.exchange(true, std::memory_order_acquire))
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "another thread is inside a collective on this communicator; a ddp_comm may be used from one "
                 "thread at a time (use ddp_allreduce_tensor_list_async to overlap, or one communicator per thread)");
    }
    ~Entry() { in_use_.store(false, std::memory_order_release); }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

private:
    std::atomic<bool>& in_use_;
};

Communicator::Communicator(std::unique_ptr<Transport> transport, std::unique_ptr<DevicePlane> device_plane,
                           const Settings& settings, cuda::GpuAssignment gpu, std::string name)
    : transport_(std::move(transport)),
      device_plane_(std::move(device_plane)),
      planes_in_front_(make_planes_in_front(*transport_, settings.planes, deadline_after(settings.timeout_s))),
      planes_(in_priority_order(planes_in_front_, *transport_), device_plane_.get()),
      settings_(settings),
      trace_(static_cast<size_t>(settings.flight_recorder_size), settings.flight_recorder_dir, transport_->channel().rank(),
             transport_->channel().size(), backend_name(), name),
      control_(transport_->channel(), settings.timeout_s, settings.stall_warning_s, settings.hang_grace_s, &trace_,
               std::move(name), settings.peer_dead_s),
      agreement_(transport_->channel(), control_, trace_),
      gpu_(std::move(gpu)) {
    channel().start_control([this](int) { return control_.status(); });
    // Agreement's rounds take the first faster route a plane in front offers.
    for (const auto& plane : planes_in_front_)
        if (AgreementRoute* route = plane->agreement_route()) {
            agreement_.route_through(*route);
            break;
        }
    if (device_plane_) {
        device_plane_->on_failure([this](ddp_status status, const std::string& message) {
            control_.break_from_device(status, message, false);  // the watchdog's thread
        });
        control_.on_break([plane = device_plane_.get()] { plane->stop_work(); });
    }
}

Communicator::~Communicator() = default;

void Communicator::refuse_during_exclusive_span() const {
    if (const std::shared_ptr<const ExclusiveSpan> span = exclusive_span_.lock())
        fail(DDP_ERR_INVALID_ARGUMENT, std::string(span->refusal));
}

std::shared_ptr<const Communicator::ExclusiveSpan> Communicator::open_exclusive_span(std::string_view refusal) {
    auto span = std::make_shared<const ExclusiveSpan>(ExclusiveSpan{refusal});
    exclusive_span_ = span;
    return span;
}

void Communicator::run(const std::function<void()>& collective) {
    Entry entry(in_use_);
    refuse_during_exclusive_span();
    worker_.drain();
    collective();
}

void Communicator::run_unordered(const std::function<void()>& call) {
    Entry entry(in_use_);
    call();
}

std::shared_ptr<RequestState> Communicator::submit(std::function<void()> collective) {
    Entry entry(in_use_);
    refuse_during_exclusive_span();
    control_.require_usable(channel().allows_concurrent_calls());  // the worker may be inside the transport
    if (!channel().allows_background_thread())
        fail(DDP_ERR_UNSUPPORTED,
             "async collectives need MPI_THREAD_SERIALIZED or better, but MPI was initialized "
             "with a lower thread level (initialize MPI with MPI_Init_thread, or let libddp do it)");
    return worker_.submit(std::move(collective));
}

void Communicator::stop_taking_part() {
    worker_.stop();
    // A peer still inside (or about to start) a collective this rank never
    // joins fails at once instead of waiting for its timeout.
    control_.announce_finalize();
}

void Communicator::release(bool peers_present) {
    trace_.timeline.stop();  // before the transport goes: the file is complete
    if (device_plane_) device_plane_->finalize(peers_present);  // NCCL before the MPI it was set up over
    finalize_in_front_then(planes_in_front_, *transport_, peers_present);
}

void Communicator::finalize(std::span<Communicator* const> subs) {
    Entry entry(in_use_);
    std::vector<std::unique_ptr<Entry>> sub_entries;
    for (Communicator* sub : subs) sub_entries.push_back(std::make_unique<Entry>(sub->in_use_));
    for (Communicator* sub : subs) sub->stop_taking_part();
    stop_taking_part();
    const bool peers_present = all_reach_finalize(channel(), control_, settings_.timeout_s);
    if (!peers_present)
        log_line(channel().rank(), channel().size(), DDP_LOG_ERROR,
                 name().empty()
                     ? "ddp_finalize: not every rank reached ddp_finalize (a rank died, is stuck, or is still "
                       "computing past the timeout); MPI is left running so that this process can exit, and the "
                       "launcher may report that it ended without MPI_Finalize"
                     : "ddp_comm_free: not every rank of " + name() +
                           " reached ddp_comm_free within its timeout (a rank died, is stuck, or is still "
                           "computing); its MPI communicators are left as they are");
    // Every rank of the world is here, so every rank of each sub is too.
    for (Communicator* sub : subs) sub->release(peers_present);
    release(peers_present);
}

}  // namespace ddp
