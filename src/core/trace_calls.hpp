// The collective-ordered trace calls on a communicator: starting the
// timeline (agreement, then the clock exchange whose offsets the file
// records), stopping it, and dumping the flight recorder.
#pragma once

#include <string>

#include "core/communicator.hpp"

namespace ddp {

/// Starts the timeline into `path`'s file for this rank (collective, in
/// call order). A file that cannot be opened is this rank's invalid call:
/// its peers are told, as for any invalid argument.
void start_timeline(Communicator& comm, const std::string& path);

/// Completes the timeline file, with the events of the async requests
/// queued before.
void stop_timeline(Communicator& comm);

/// Writes the flight recorder to `path`'s file for this rank, or to the
/// log when `path` is nullptr.
void dump_flight_recorder(Communicator& comm, const char* path);

}  // namespace ddp
