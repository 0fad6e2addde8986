#include "trace/timeline.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <utility>

#include "ddp/ddp.h"
#include "util/error.hpp"

namespace ddp::trace {

namespace {

// Events buffered before the writer thread must catch up (about 10 MB).
constexpr size_t buffered_events = size_t{1} << 16;
// How often the writer wakes when the buffer is not filling fast.
constexpr auto write_interval = std::chrono::milliseconds(100);
// Names in one event: enough to tell buckets apart, never a model's worth.
constexpr size_t names_per_event = 16;
constexpr size_t name_chars = 80;
constexpr int rows_per_thread = 8;

std::atomic<int> next_slot{0};
thread_local int this_slot = -1;

std::mutex& roles_mutex() {
    static std::mutex mutex;
    return mutex;
}
std::map<int, std::string>& roles() {  // guarded by roles_mutex()
    static std::map<int, std::string> by_slot;
    return by_slot;
}

int slot() {
    if (this_slot < 0) this_slot = next_slot.fetch_add(1, std::memory_order_relaxed);
    return this_slot;
}

void append_escaped(std::string& out, const char* text, size_t limit) {
    size_t written = 0;
    for (const char* c = text; *c != '\0' && written < limit; ++c, ++written) {
        const auto byte = static_cast<unsigned char>(*c);
        if (byte == '"' || byte == '\\') {
            out += '\\';
            out += *c;
        } else if (byte < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
            out += escaped;
        } else {
            out += *c;
        }
    }
}

const char* row_name(int row) {
    switch (row) {
    case static_cast<int>(Row::calls): return "calls";
    case static_cast<int>(Row::work): return "work";
    case static_cast<int>(Row::queue): return "async queue";
    default: return "transfer";
    }
}

}  // namespace

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void name_this_thread(const char* role) {
    std::lock_guard lock(roles_mutex());
    roles()[slot()] = role;
}

int thread_row(Row row, int lane) { return slot() * rows_per_thread + static_cast<int>(row) + lane; }

std::string names_json(std::span<const char* const> names, std::span<const int64_t> indices) {
    std::string out = "[";
    size_t shown = 0;
    for (int64_t index : indices) {
        if (shown == names_per_event) {
            out += ",\"... ";
            out += std::to_string(indices.size() - shown);
            out += " more\"";
            break;
        }
        const char* name = static_cast<size_t>(index) < names.size() ? names[static_cast<size_t>(index)] : nullptr;
        out += shown++ == 0 ? "\"" : ",\"";
        if (name != nullptr)
            append_escaped(out, name, name_chars);
        else
            out.append("#").append(std::to_string(index));
        out += '"';
    }
    return out + "]";
}

std::string names_json(std::span<const char* const> names) {
    std::vector<int64_t> all(names.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    return names_json(names, all);
}

std::string with_rank(const std::string& path, int rank) {
    const std::string r = std::to_string(rank);
    std::string out = path;
    for (size_t p = out.find("%r"); p != std::string::npos; p = out.find("%r", p + r.size())) out.replace(p, 2, r);
    return out;
}

std::string per_rank_path(const std::string& path, int rank) {
    if (path.find("%r") != std::string::npos) return with_rank(path, rank);
    const std::string r = std::to_string(rank);
    const std::string suffix = ".json";
    if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
        return path.substr(0, path.size() - suffix.size()) + ".rank" + r + suffix;
    return path + ".rank" + r + suffix;
}

std::string file_tag(const std::string& name) {
    std::string tag;
    for (char c : name) tag += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return tag;
}

std::string tagged_path(const std::string& path, const std::string& tag) {
    const std::string suffix = ".json";
    if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
        return path.substr(0, path.size() - suffix.size()) + "." + tag + suffix;
    return path + "." + tag;
}

Timeline::~Timeline() { stop(); }

void Timeline::open(const std::string& file, int rank, int size, const char* backend) {
    if (on() || file_ != nullptr) fail(DDP_ERR_INVALID_ARGUMENT, "a timeline is already recording (to '" + file_name_ + "')");
    std::FILE* opened = std::fopen(file.c_str(), "w");
    if (opened == nullptr)
        fail(DDP_ERR_INVALID_ARGUMENT, "cannot create the timeline file '" + file + "': " + std::strerror(errno));
    file_ = opened;
    file_name_ = file;
    rank_ = rank;
    size_ = size;
    backend_ = backend;
}

void Timeline::start(const ClockSync& clock) {
    const auto unix_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    std::fprintf(file_,
                 "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"writer\":\"libddp %s\",\"rank\":%d,\"size\":%d,"
                 "\"backend\":\"%s\",\"clock\":\"steady (CLOCK_MONOTONIC), microseconds\","
                 "\"clock_offset_us\":%.3f,\"clock_offset_spread_us\":%.3f,\"clock_samples\":%d,"
                 "\"started_ts_us\":%.3f,\"started_unix_us\":%lld},\n\"traceEvents\":[\n"
                 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d\"}},\n"
                 "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                 ddp_version_string(), rank_, size_, backend_, clock.offset_us, clock.spread_us, clock.samples,
                 static_cast<double>(now_ns()) / 1000.0, static_cast<long long>(unix_us), rank_, rank_, rank_, rank_);
    named_rows_.clear();
    {
        std::lock_guard lock(mutex_);
        pending_.clear();
        pending_.reserve(buffered_events);
        dropped_ = 0;
        stopping_ = false;
    }
    writer_ = std::thread([this] { write_loop(); });
    recording_.store(true, std::memory_order_release);
}

void Timeline::stop() {
    if (!on()) {
        if (file_ != nullptr) {  // opened, but the start failed
            std::fclose(file_);
            file_ = nullptr;
        }
        return;
    }
    recording_.store(false, std::memory_order_release);
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    writer_.join();
    std::fputs("\n]}\n", file_);
    std::fclose(file_);
    file_ = nullptr;
}

void Timeline::record(Event&& event) {
    bool wake = false;
    {
        std::lock_guard lock(mutex_);
        if (pending_.size() >= buffered_events) {
            ++dropped_;
            return;
        }
        pending_.push_back(std::move(event));
        wake = pending_.size() == buffered_events / 2;
    }
    if (wake) wake_.notify_all();
}

void Timeline::write_loop() {
    std::vector<Event> batch;
    batch.reserve(buffered_events);
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait_for(lock, write_interval, [this] { return stopping_ || pending_.size() >= buffered_events / 2; });
        batch.swap(pending_);
        const uint64_t dropped = std::exchange(dropped_, 0);
        const bool last = stopping_;
        lock.unlock();
        for (const Event& event : batch) write_event(event);
        batch.clear();
        if (dropped > 0) {
            std::fprintf(file_,
                         ",\n{\"name\":\"dropped events\",\"cat\":\"ddp\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,"
                         "\"tid\":0,\"ts\":%.3f,\"args\":{\"count\":%llu}}",
                         rank_, static_cast<double>(now_ns()) / 1000.0, static_cast<unsigned long long>(dropped));
        }
        std::fflush(file_);
        lock.lock();
        if (last && pending_.empty()) return;
    }
}

void Timeline::name_row(int tid) {
    if (!named_rows_.insert(tid).second) return;
    const int slot_index = tid / rows_per_thread, row = tid % rows_per_thread;
    std::string role;
    {
        std::lock_guard lock(roles_mutex());
        const auto found = roles().find(slot_index);
        role = found != roles().end() ? found->second : "caller thread " + std::to_string(slot_index);
    }
    std::string name = role + ": " + row_name(row);
    if (row >= static_cast<int>(Row::transfer) && row < static_cast<int>(Row::transfer) + transfer_lanes)
        name.append(" ").append(std::to_string(row - static_cast<int>(Row::transfer) + 1));
    std::fprintf(file_,
                 ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}"
                 ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                 rank_, tid, name.c_str(), rank_, tid, tid);
}

void Timeline::write_event(const Event& event) {
    name_row(event.tid);
    std::string args;
    if (event.sequence != 0) args.append(",\"seq\":").append(std::to_string(event.sequence));
    if (event.bytes >= 0) args.append(",\"bytes\":").append(std::to_string(event.bytes));
    if (event.index >= 0) args += ",\"" + std::string(event.index_name) + "\":" + std::to_string(event.index);
    if (event.plane != nullptr) args += ",\"plane\":\"" + std::string(event.plane) + "\"";
    if (event.failed) args += ",\"failed\":true";
    if (!event.names.empty()) args += ",\"names\":" + event.names;
    if (!args.empty()) args[0] = '{';
    std::fprintf(file_, ",\n{\"name\":\"%s\",\"cat\":\"ddp\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f", event.name,
                 event.phase, rank_, event.tid, static_cast<double>(event.ts_ns) / 1000.0);
    if (event.phase == 'X') std::fprintf(file_, ",\"dur\":%.3f", static_cast<double>(event.dur_ns) / 1000.0);
    if (event.phase == 'i') std::fputs(",\"s\":\"t\"", file_);
    std::fprintf(file_, ",\"args\":%s}", args.empty() ? "{}" : (args + "}").c_str());
}

void Span::begin(Timeline& timeline, const char* name, Row row, uint64_t sequence, int lane) {
    timeline_ = &timeline;
    uncaught_ = std::uncaught_exceptions();
    Event& event = event_.emplace();
    event.name = name;
    event.tid = thread_row(row, lane);
    event.sequence = sequence;
    event.ts_ns = now_ns();
}

void Span::end() {
    event_->dur_ns = now_ns() - event_->ts_ns;
    event_->failed = std::uncaught_exceptions() > uncaught_;
    timeline_->record(std::move(*event_));
}

Event ended_now(const char* name, int tid, int64_t started_ns, uint64_t sequence) {
    Event event;
    event.name = name;
    event.tid = tid;
    event.ts_ns = started_ns;
    event.dur_ns = now_ns() - started_ns;
    event.sequence = sequence;
    return event;
}

void instant(Timeline& timeline, const char* name, Row row, uint64_t sequence, int64_t index,
             const char* index_name, std::string names) {
    if (!timeline.on()) return;
    Event event;
    event.name = name;
    event.phase = 'i';
    event.tid = thread_row(row);
    event.ts_ns = now_ns();
    event.sequence = sequence;
    event.index = index;
    event.index_name = index_name;
    event.names = std::move(names);
    timeline.record(std::move(event));
}

}  // namespace ddp::trace
