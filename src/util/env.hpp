// Reading libddp's environment variables (DDP_BACKEND, DDP_FUSION_BYTES,
// DDP_LOG_LEVEL, DDP_TIMEOUT_S). A malformed value is an error that names
// the variable, never silently ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ddp {

/// The variable's value, or nothing when unset or empty.
std::optional<std::string> env_string(const char* name);

/// A byte count with an optional K, M or G suffix (powers of 1024).
std::optional<int64_t> env_bytes(const char* name);

/// A whole number in [0, max].
std::optional<int64_t> env_count(const char* name, int64_t max);

/// A positive number of seconds.
std::optional<double> env_seconds(const char* name);

/// A switch: 1, on, true, yes or 0, off, false, no (any case).
std::optional<bool> env_switch(const char* name);

}  // namespace ddp
