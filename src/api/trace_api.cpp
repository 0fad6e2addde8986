// The exported trace calls: the timeline and the flight recorder.
#include "api/boundary.hpp"
#include "api/validate.hpp"
#include "core/dispatch.hpp"
#include "core/trace_calls.hpp"

using namespace ddp;

extern "C" {

DDP_API ddp_status ddp_timeline_start(ddp_comm* comm, const char* path) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        try {
            require_not_null(path, "path");
        } catch (const Error& invalid) {
            reject_invalid_call(c, CollectiveKind::timeline_start, 0, invalid);
        }
        start_timeline(c, path);
    });
}

DDP_API ddp_status ddp_timeline_stop(ddp_comm* comm) {
    return guarded([&] { stop_timeline(live_comm(comm)); });
}

DDP_API ddp_status ddp_dump_flight_recorder(ddp_comm* comm, const char* path) {
    return guarded([&] { dump_flight_recorder(live_comm(comm), path); });
}

}  // extern "C"
