#include "core/trace_calls.hpp"

#include "control/agreement.hpp"
#include "core/dispatch.hpp"
#include "core/clock_sync.hpp"
#include "trace/timeline.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp {

void start_timeline(Communicator& comm, const std::string& path) {
    comm.run([&] {
        ControlChannel& channel = comm.channel();
        ControlPlane& control = comm.control();
        trace::Timeline& timeline = comm.trace().timeline;
        try {
            timeline.open(trace::per_rank_path(path, channel.rank()), channel.rank(), channel.size(),
                          comm.backend_name());
        } catch (const Error& invalid) {
            report_invalid_call(comm, CollectiveKind::timeline_start, 0, invalid);
        }
        try {
            CallContext context = control.begin(CollectiveKind::timeline_start, 0);
            CallScope scope(control);
            const int64_t started_ns = trace::now_ns();
            comm.agreement().agree(context, encode(CallDescription{CollectiveKind::timeline_start, DDP_OP_SUM, 0, 0, 0, {}}));
            timeline.start(measure_clock_offset(channel, control, context));
            trace::Event call = trace::ended_now(kind_name(static_cast<uint64_t>(CollectiveKind::timeline_start)),
                                                 trace::thread_row(trace::Row::calls), started_ns, context.sequence);
            call.plane = comm.backend_name();
            timeline.record(std::move(call));
        } catch (...) {
            timeline.stop();  // closes the file it opened
            throw;
        }
    });
}

void stop_timeline(Communicator& comm) {
    comm.run_unordered([&] {
        comm.drain_async();  // the queued requests' events belong in the file
        comm.trace().timeline.stop();
    });
}

void dump_flight_recorder(Communicator& comm, const char* path) {
    // The file as named, "%r" standing for the rank; NULL: the automatic one,
    // which the log names.
    const std::string file = path != nullptr ? trace::with_rank(path, comm.rank()) : std::string();
    const std::string written = comm.trace().recorder.dump("ddp_dump_flight_recorder", file);
    if (path == nullptr) log_line(comm.rank(), comm.size(), DDP_LOG_WARN, "flight recorder written to " + written);
}

}  // namespace ddp
