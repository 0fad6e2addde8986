// Rank-prefixed log lines to stderr or to the user's callback.
#pragma once

#include <string>

#include "ddp/ddp.h"

namespace ddp {

bool is_valid_log_level(int level);

/// DDP_LOG_LEVEL as a threshold (default info); throws on a bad value.
int log_threshold_from_environment();
/// Sets the process's threshold (ddp_init does, from its settings).
void set_log_threshold(int level);

/// Writes "[ddp RANK/SIZE HH:MM:SS.mmm] message" when level passes the threshold.
void log_line(int rank, int size, int level, const std::string& message);

void set_log_callback(ddp_log_callback callback, void* user);

/// A duration as messages write it: "0.1 s", "11 s", "2.5e+03 s".
std::string seconds_text(double seconds);

}  // namespace ddp
