#include "core/collectives.hpp"

#include <chrono>
#include <new>

#include "control/agreement.hpp"
#include "core/collectives/collective_rules.hpp"
#include "core/device_collectives.hpp"
#include "trace/timeline.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

// Which plane moves the call's bytes, as the timeline names it (on the
// host, each step's transfer names the plane that ran it).
const char* plane_name(Communicator& comm, const CollectiveCall& call, bool carried) {
    if (carried) return "agreement's messages";
    if (call.on_device) return runs_on_gpu(comm, call) ? comm.planes().device()->name() : "staged through host memory";
    return comm.transport().name();
}

// Whether the call runs a fusion plan over its tensors in place (allreduce,
// reduce, broadcast, sync_optimizer_state), where one region is one step
// (on a device plane, one call).
bool in_place_planned(const CollectiveRules& rules, const CollectiveCall& call) {
    return rules.planned && call.outputs.empty();
}

// A call whose bucket size is chosen by measurement (core/bucket_tuning.hpp):
// while the list's tuner explores, the call runs the next candidate and
// measures it; the next agreement round agrees on its duration, which the
// next tuned call (of any list) hands to the tuner before it chooses.
void run_tuned(Communicator& comm, CallContext& context, const CollectiveCall& call, std::span<const uint64_t> words) {
    CarriedDuration& duration = comm.agreement().carried_duration();
    PlanCache::TimedCall& timed = comm.plans().timed_call();
    if (timed.tuning) {
        timed.tuning->record(timed.candidate, duration.take_agreed());
        timed = {};
    }
    const std::shared_ptr<BucketTuning> tuning = comm.plans().tuning(words, call.tensors);
    const size_t candidate = tuning->next();
    trace::Timeline& timeline = comm.trace().timeline;
    if (tuning->decided()) {
        if (tuning->first_chosen_call()) {
            trace::instant(timeline, "bucket size chosen", trace::Row::work, context.sequence,
                           tuning->bucket_bytes(candidate), "bucket_bytes");
            log_line(comm.rank(), comm.size(), DDP_LOG_DEBUG,
                     std::string(kind_name(static_cast<uint64_t>(call.kind))) + " of " +
                         std::to_string(call.tensors.size()) + " tensors (" + std::to_string(described_bytes(words)) +
                         " bytes): bucket size " + std::to_string(tuning->bucket_bytes(candidate)) +
                         " chosen by measurement (" + tuning->summary() + ")");
        }
        return rules_for(call.kind).host(comm, context, call, tuning->plan(candidate));
    }
    trace::instant(timeline, "bucket size tried", trace::Row::work, context.sequence, tuning->bucket_bytes(candidate),
                   "bucket_bytes");
    timed = {tuning, candidate};
    const auto started = std::chrono::steady_clock::now();
    rules_for(call.kind).host(comm, context, call, tuning->plan(candidate));
    duration.measured(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count()));
}

}  // namespace

void run_collective(Communicator& comm, const CollectiveCall& call) {
    ControlPlane& control = comm.control();
    CallContext context = control.begin(call.kind, call.timeout_s, call.for_binding);
    CallScope scope(control);
    trace::Span span(comm.trace().timeline, kind_name(static_cast<uint64_t>(call.kind)), trace::Row::calls,
                     context.sequence);
    const std::vector<uint64_t> words = encode(CallDescription{call.kind, call.op, call.root, call.fusion_bytes,
                                                               static_cast<int64_t>(call.scalars.size()), call.tensors});
    const CollectiveRules& rules = rules_for(call.kind);
    const int64_t carried = rules.carried_bytes != nullptr ? rules.carried_bytes(comm, call) : 0;
    if (span.on()) {
        span.event().bytes = described_bytes(words);
        span.event().plane = plane_name(comm, call, carried != 0);
        if (!call.names.empty()) span.event().names = trace::names_json(call.names);
    }
    if (carried != 0) return rules.in_agreement(comm, context, call, words, carried);
    // Whether some rank's tensors are not one region (voted in agreement's
    // message: addresses differ between ranks, the steps they take may not).
    uint64_t scattered = in_place_planned(rules, call) && lies_in_one_region(call.tensors) ? 0 : 1;
    comm.agreement().agree(context, words, nullptr, &scattered, call.names);
    if (comm.size() == 1 && call.outputs.empty()) {  // one rank: every result is the input
        if (call.identical != nullptr) *call.identical = true;
        if (call.gpu_request) call.gpu_request->state->complete(DDP_OK, "");
        return;
    }
    // Past agreement the peers count on this rank: if it fails on its own
    // (out of memory, a plane's error), they are told at once instead of
    // waiting for their timeout. A host step that no plane runs fails on
    // every rank alike (the tables are the same everywhere): nobody waits.
    try {
        if (call.on_device)
            run_device_data_phase(comm, context, call, words, scattered == 0);
        else
            run_host_data_phase(comm, context, call, words, scattered == 0);
    } catch (const Error& error) {
        const bool alike_everywhere = error.status() == DDP_ERR_UNSUPPORTED && !call.on_device;
        if (error.status() != DDP_ERR_TIMEOUT && !alike_everywhere) control.abort(std::string(error.what()));
        throw;
    } catch (const std::bad_alloc&) {
        control.abort("out of memory during " + std::string(kind_name(static_cast<uint64_t>(call.kind))));
        throw;
    }
}

void run_host_data_phase(Communicator& comm, CallContext& context, const CollectiveCall& call,
                         std::span<const uint64_t> words, bool one_region) {
    const CollectiveRules& rules = rules_for(call.kind);
    if (!rules.planned) return rules.host(comm, context, call, FusionPlan{});
    if (one_region && in_place_planned(rules, call)) return rules.host(comm, context, call, one_region_plan(call.tensors));
    if (call.fusion_bytes != 0)
        return rules.host(comm, context, call,
                          comm.plans().plan(words, call.tensors, policy_for_bucket_bytes(call.fusion_bytes)));
    run_tuned(comm, context, call, words);
}

void broadcast_scalars(Communicator& comm, CallContext& context, const CollectiveCall& call) {
    if (call.scalars.empty()) return;
    const auto bytes = static_cast<int64_t>(call.scalars.size_bytes());
    HostPlane& plane = comm.planes().host_for(DataOp::broadcast, DDP_DTYPE_F64, DDP_OP_SUM, bytes);
    comm.control().wait(context, plane.start_broadcast(call.scalars.data(), bytes, call.root), WaitStyle::for_data);
}

void announce_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, std::string_view reason) {
    ControlPlane& control = comm.control();
    CallContext context = control.begin(kind, timeout_s);
    CallScope scope(control);
    comm.agreement().agree_on_invalid_call(context, reason);
}

}  // namespace ddp
