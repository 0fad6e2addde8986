#include "util/log.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include <unistd.h>

#include "util/descriptor.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "util/host_callback.h"

namespace ddp {

namespace {

std::mutex log_mutex;
ddp_log_callback log_callback = nullptr;
void* log_callback_user = nullptr;

std::atomic<int> threshold{DDP_LOG_INFO};

/// The line and its newline in one write(2), so that ranks' lines sharing a
/// terminal or mpirun's output never interleave.
void write_whole_line(const std::string& line) {
    std::fflush(stderr);  // what the program wrote through stdio goes first
    write_all(STDERR_FILENO, line + "\n");  // false: nowhere to log to
}

}  // namespace

int log_threshold_from_environment() {
    auto text = env_string("DDP_LOG_LEVEL");
    if (!text) return DDP_LOG_INFO;
    if (*text == "debug") return DDP_LOG_DEBUG;
    if (*text == "info") return DDP_LOG_INFO;
    if (*text == "warn" || *text == "warning") return DDP_LOG_WARN;
    if (*text == "error") return DDP_LOG_ERROR;
    if (*text == "off") return DDP_LOG_ERROR + 1;
    char* end = nullptr;
    long number = std::strtol(text->c_str(), &end, 10);
    if (end != text->c_str() && *end == '\0') return static_cast<int>(number);
    fail(DDP_ERR_INVALID_ARGUMENT,
         "DDP_LOG_LEVEL='" + *text + "' is not debug, info, warn, error, off or a number");
}

void set_log_threshold(int level) { threshold.store(level, std::memory_order_relaxed); }

namespace {

std::string timestamp() {
    auto now = std::chrono::system_clock::now();
    std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::tm local{};
    localtime_r(&seconds, &local);
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%02d:%02d:%02d.%03d", local.tm_hour, local.tm_min,
                  local.tm_sec, static_cast<int>(millis.count()));
    return buffer;
}

}  // namespace

bool is_valid_log_level(int level) {
    return level == DDP_LOG_DEBUG || level == DDP_LOG_INFO || level == DDP_LOG_WARN ||
           level == DDP_LOG_ERROR;
}

void log_line(int rank, int size, int level, const std::string& message) {
    if (level < threshold.load(std::memory_order_relaxed)) return;
    std::string line = "[ddp " + std::to_string(rank) + "/" + std::to_string(size) + " " +
                       timestamp() + "] " + message;
    std::lock_guard lock(log_mutex);
    if (log_callback != nullptr)
        ddp_call_host_log_callback(log_callback, level, line.c_str(), log_callback_user);
    else
        write_whole_line(line);
}

void set_log_callback(ddp_log_callback callback, void* user) {
    std::lock_guard lock(log_mutex);
    log_callback = callback;
    log_callback_user = user;
}

std::string seconds_text(double seconds) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g s", seconds);
    return text;
}

}  // namespace ddp
