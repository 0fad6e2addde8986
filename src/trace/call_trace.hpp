// What a communicator records of its calls: its timeline (off unless
// started) and its flight recorder (its last calls, dumped when it breaks).
// Its control plane and agreement write into them as calls go; the trace
// API (ddp_timeline_*, ddp_dump_flight_recorder) reads them.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "trace/flight_recorder.hpp"
#include "trace/timeline.hpp"

namespace ddp::trace {

struct CallTrace {
    /// The flight recorder keeps `recorder_size` calls (0: none) and dumps
    /// to `recorder_dir` (see FlightRecorder).
    CallTrace(size_t recorder_size, std::string recorder_dir, int rank, int size, const char* backend,
              std::string communicator = {})
        : recorder(recorder_size, std::move(recorder_dir), rank, size, backend, std::move(communicator)) {}

    Timeline timeline;
    FlightRecorder recorder;
};

}  // namespace ddp::trace
