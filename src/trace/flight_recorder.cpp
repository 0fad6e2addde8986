#include "trace/flight_recorder.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "control/collective_kind.hpp"
#include "ddp/ddp.h"
#include "util/error.hpp"
#include "util/log.hpp"

namespace ddp::trace {

namespace {

int64_t unix_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

const char* state_name(CallState state) {
    switch (state) {
    case CallState::entered: return "entered";
    case CallState::agreed: return "agreed";
    case CallState::finished: return "finished";
    case CallState::failed: return "failed";
    case CallState::mismatch: return "mismatch";
    case CallState::timed_out: return "timed out";
    case CallState::aborted: return "aborted";
    }
    return "unknown";
}

std::string escaped(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity, std::string dir, int rank, int size, const char* backend)
    : ring_(capacity), dir_(std::move(dir)), rank_(rank), size_(size), backend_(backend) {}

FlightRecorder::Entry* FlightRecorder::find(uint64_t sequence) {
    if (ring_.empty()) return nullptr;
    Entry& entry = ring_[sequence % ring_.size()];
    return entry.sequence == sequence ? &entry : nullptr;
}

void FlightRecorder::entered(uint64_t sequence, uint64_t kind) {
    if (ring_.empty()) return;
    const int64_t now = unix_us();
    std::lock_guard lock(mutex_);
    ring_[sequence % ring_.size()] = Entry{sequence, kind, {}, false, now, 0, 0, CallState::entered};
}

void FlightRecorder::described(uint64_t sequence, const CallSummary& summary) {
    std::lock_guard lock(mutex_);
    if (Entry* entry = find(sequence)) {
        entry->summary = summary;
        entry->described = true;
    }
}

void FlightRecorder::agreed(uint64_t sequence) {
    if (ring_.empty()) return;
    const int64_t now = unix_us();
    std::lock_guard lock(mutex_);
    if (Entry* entry = find(sequence); entry && entry->agreed_us == 0) {
        entry->agreed_us = now;
        if (entry->state == CallState::entered) entry->state = CallState::agreed;
    }
}

void FlightRecorder::ended(uint64_t sequence, bool failed) {
    if (ring_.empty()) return;
    const int64_t now = unix_us();
    std::lock_guard lock(mutex_);
    if (Entry* entry = find(sequence); entry && entry->finished_us == 0) {
        entry->finished_us = now;
        if (!failed && !(entry->described && !entry->summary.valid))  // an invalid call fails after it ends
            entry->state = CallState::finished;
        else if (entry->state == CallState::entered || entry->state == CallState::agreed)
            entry->state = CallState::failed;
    }
}

void FlightRecorder::mark(uint64_t sequence, CallState state) {
    std::lock_guard lock(mutex_);
    if (Entry* entry = find(sequence)) entry->state = state;
}

std::string FlightRecorder::json(const std::string& reason) const {
    std::vector<Entry> entries;
    {
        std::lock_guard lock(mutex_);
        for (const Entry& entry : ring_)
            if (entry.sequence != 0) entries.push_back(entry);
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.sequence < b.sequence; });
    char head[256];
    std::snprintf(head, sizeof head,
                  "{\"flight_recorder\":1,\"writer\":\"libddp %s\",\"rank\":%d,\"size\":%d,\"backend\":\"%s\","
                  "\"capacity\":%zu,\"dumped_unix_us\":%lld,",
                  ddp_version_string(), rank_, size_, backend_, ring_.size(), static_cast<long long>(unix_us()));
    std::string out = head;
    out += "\"reason\":\"" + escaped(reason) + "\",\"calls\":[";
    for (size_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        char line[512];
        std::snprintf(line, sizeof line,
                      "%s{\"seq\":%llu,\"kind\":\"%s\",\"state\":\"%s\",\"entered_unix_us\":%lld,"
                      "\"agreed_unix_us\":%lld,\"finished_unix_us\":%lld",
                      i == 0 ? "" : ",", static_cast<unsigned long long>(e.sequence), kind_name(e.kind),
                      state_name(e.state), static_cast<long long>(e.entered_us), static_cast<long long>(e.agreed_us),
                      static_cast<long long>(e.finished_us));
        out += line;
        if (e.described) {
            std::snprintf(line, sizeof line,
                          ",\"valid\":%s,\"tensors\":%lld,\"bytes\":%lld,\"op\":%d,\"root\":%d,\"hash\":\"%016llx\"",
                          e.summary.valid ? "true" : "false", static_cast<long long>(e.summary.tensors),
                          static_cast<long long>(e.summary.bytes), e.summary.op, e.summary.root,
                          static_cast<unsigned long long>(e.summary.hash));
            out += line;
        }
        out += "}";
    }
    return out + "]}";
}

void FlightRecorder::dump(const std::string& reason, const std::string& file) const {
    const std::string text = json(reason);
    const bool on_demand = !file.empty();
    const std::string target =
        on_demand ? file : (dir_.empty() ? std::string() : dir_ + "/ddp-flight-recorder.rank" + std::to_string(rank_) + ".json");
    if (!target.empty()) {
        if (std::FILE* out = std::fopen(target.c_str(), "w")) {
            const bool written = std::fputs(text.c_str(), out) >= 0 && std::fputc('\n', out) != EOF;
            if (std::fclose(out) == 0 && written) {
                if (!on_demand)
                    log_line(rank_, size_, DDP_LOG_WARN, "flight recorder written to " + target + " (" + reason + ")");
                return;
            }
        }
        const std::string why = "cannot write the flight recorder to '" + target + "': " + std::strerror(errno);
        if (on_demand) fail(DDP_ERR_INVALID_ARGUMENT, why);
        log_line(rank_, size_, DDP_LOG_WARN, why);
    }
    log_line(rank_, size_, DDP_LOG_WARN, "flight recorder: " + text);
}

}  // namespace ddp::trace
