// A communicator's timeline: Chrome trace-event JSON of every phase of every
// collective, for people asking why a step was slow (ddp_timeline_start).
// Off, an event costs one relaxed load and one predictable branch. On, an
// event goes into a bounded buffer under a mutex and a background thread
// formats and writes it; when that thread falls behind, events are dropped
// and the file says how many.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace ddp::trace {

/// The rows (Chrome trace "tid"s) of one thread of a rank.
enum class Row : int {
    calls = 0,     ///< one event per collective (or reducer step), marks
    work = 1,      ///< what the thread does: agreement, pack, unpack, staging, waits
    transfer = 2,  ///< operations in flight, one lane per concurrent one (2..5)
    queue = 6,     ///< async requests waiting for the worker
};
constexpr int transfer_lanes = 4;

/// Nanoseconds of the steady clock (CLOCK_MONOTONIC), the timeline's clock.
int64_t now_ns();

/// Names the calling thread's rows ("libddp worker"); the first thread that
/// records without a name is "caller thread N".
void name_this_thread(const char* role);

/// The calling thread's row `row` (lane: for Row::transfer).
int thread_row(Row row, int lane = 0);

/// A recorded event, formatted later by the writer thread.
struct Event {
    const char* name = "";  ///< static string
    char phase = 'X';       ///< X (complete), B, E, i (instant)
    int tid = 0;
    int64_t ts_ns = 0;
    int64_t dur_ns = 0;
    uint64_t sequence = 0;  ///< the collective's number (0: none)
    int64_t bytes = -1;
    int64_t index = -1;     ///< bucket, step or gradient index
    const char* index_name = "bucket";
    const char* plane = nullptr;
    bool failed = false;
    std::string names;      ///< a JSON array of tensor names, or empty
};

/// Clock offsets measured when the timeline started (see clock_sync.hpp).
struct ClockSync {
    double offset_us = 0;  ///< this rank's clock minus rank 0's, to subtract
    double spread_us = 0;  ///< how far the samples were apart (the offset's precision)
    int samples = 0;
};

/// A JSON array of the names of `indices` (at most a few, each cut short):
/// names are for people reading a trace, not a copy of the model.
std::string names_json(std::span<const char* const> names, std::span<const int64_t> indices);
std::string names_json(std::span<const char* const> names);

class Timeline {
public:
    Timeline() = default;
    ~Timeline();
    Timeline(const Timeline&) = delete;
    Timeline& operator=(const Timeline&) = delete;

    bool on() const { return recording_.load(std::memory_order_relaxed); }
    /// Opens this rank's file (throws DDP_ERR_INVALID_ARGUMENT when it cannot).
    void open(const std::string& file, int rank, int size, const char* backend);
    /// Starts recording into the opened file, with the measured offsets.
    void start(const ClockSync& clock);
    /// Stops, writes what is buffered and completes the file. No-op when off.
    void stop();
    /// Buffers `event` (only call when on()).
    void record(Event&& event);

private:
    void write_loop();
    void write_event(const Event& event);
    void name_row(int tid);

    std::atomic<bool> recording_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::vector<Event> pending_;  // guarded by mutex_
    uint64_t dropped_ = 0;        // guarded by mutex_
    bool stopping_ = false;       // guarded by mutex_
    std::FILE* file_ = nullptr;   // the writer thread's while recording
    std::string file_name_;
    std::set<int> named_rows_;
    int rank_ = 0;
    int size_ = 1;
    const char* backend_ = "";
    std::thread writer_;
};

/// A complete (X) event from construction to destruction: while the
/// timeline is off it costs a load, a branch and an empty optional, and
/// reads no clock.
class Span {
public:
    Span(Timeline& timeline, const char* name, Row row, uint64_t sequence, int lane = 0) {
        if (timeline.on()) [[unlikely]]
            begin(timeline, name, row, sequence, lane);
    }
    ~Span() {
        if (event_) [[unlikely]]
            end();
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

    bool on() const { return event_.has_value(); }
    /// Details; only when on().
    Event& event() { return *event_; }

private:
    void begin(Timeline& timeline, const char* name, Row row, uint64_t sequence, int lane);
    void end();

    Timeline* timeline_ = nullptr;
    std::optional<Event> event_;
    int uncaught_ = 0;
};

/// A complete (X) event on row `tid` for what began at `started_ns` and
/// ends now, for work whose start and end are in different places (a
/// transfer, a bucket, a queued request); Span serves one scope.
Event ended_now(const char* name, int tid, int64_t started_ns, uint64_t sequence);

/// An instant (i) event on the calling thread's row.
void instant(Timeline& timeline, const char* name, Row row, uint64_t sequence, int64_t index,
             const char* index_name, std::string names = {});

/// `path` with every "%r" replaced by `rank`.
std::string with_rank(const std::string& path, int rank);

/// This rank's timeline file for a user's path: "%r" replaced by the rank,
/// else ".rankR" before a final ".json", else ".rankR.json" appended.
std::string per_rank_path(const std::string& path, int rank);

/// A communicator's name as part of a file name: letters and digits kept,
/// the rest '_' ("local group 2" is "local_group_2").
std::string file_tag(const std::string& name);

/// `path` for one of several communicators that share it: ".TAG" before a
/// final ".json", else appended.
std::string tagged_path(const std::string& path, const std::string& tag);

}  // namespace ddp::trace
