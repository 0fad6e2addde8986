// A communicator's flight recorder: the last N collectives (kind, sequence
// number, sizes, description hash, times entered, agreed and finished, and
// state), always on, written by every rank into a file of its own when the
// communicator breaks (a timeout, a dead peer, an abort, a GPU failure), or
// on demand (ddp_dump_flight_recorder). scripts/ddp-trace explain reads
// every rank's dump and names the rank that is behind, or the call that
// first differs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "trace/report_files.hpp"

namespace ddp::trace {

enum class CallState { entered, agreed, finished, failed, mismatch, timed_out };

/// What a rank passed to a collective, as agreement compares it.
struct CallSummary {
    bool valid = true;  ///< false: this rank's arguments failed validation
    int32_t op = -1;
    int32_t root = -1;
    int64_t tensors = 0;
    int64_t bytes = 0;
    uint64_t hash = 0;  ///< of agreement's words: equal hashes, equal calls
};

/// Collectives a flight recorder keeps unless told (DDP_FLIGHT_RECORDER_SIZE).
inline constexpr size_t default_flight_recorder_size = 64;

class FlightRecorder {
public:
    /// `capacity` 0 turns it off. `dir`: where automatic dumps go
    /// (DDP_FLIGHT_RECORDER_DIR; "": the default, see ReportDir).
    /// `communicator`: a sub-communicator's name, recorded in the dump and
    /// in its automatic file's name ("" for the world).
    FlightRecorder(size_t capacity, std::string dir, int rank, int size, const char* backend,
                   std::string communicator = {});

    /// `label`: how messages name the call (CallLabel::word).
    void entered(uint64_t sequence, uint64_t kind, uint64_t label);
    void described(uint64_t sequence, const CallSummary& summary);
    void agreed(uint64_t sequence);
    /// Finished, or failed (a more precise state already marked stays).
    void ended(uint64_t sequence, bool failed);
    void mark(uint64_t sequence, CallState state);

    /// The dump as one line of JSON.
    std::string json(const std::string& reason) const;
    /// Writes the dump to `file`, or ("") to this rank's file in the
    /// automatic folder (ddp-flight-recorder.[COMMUNICATOR.]rankR.json), and
    /// returns the file's path. Throws DDP_ERR_INVALID_ARGUMENT saying why
    /// when it cannot be written.
    std::string dump(const std::string& reason, const std::string& file = {}) const;

private:
    /// One call, as a dump reads it.
    struct Entry {
        uint64_t sequence = 0;  ///< 0: empty
        uint64_t kind = 0;
        uint64_t label = 0;
        CallSummary summary;
        bool described = false;
        int64_t entered_ns = 0, agreed_ns = 0, finished_ns = 0;  ///< coarse monotonic clock; 0: not yet
        CallState state = CallState::entered;
    };
    /// An entry in the ring as relaxed atomics, written without a lock by
    /// the thread running the call (the version is odd while it writes) and
    /// read by dumps from any thread, which retry while a write is under way
    /// (a seqlock).
    struct Slot {
        std::atomic<uint64_t> version{0};
        std::atomic<uint64_t> sequence{0}, kind{0}, label{0}, hash{0};
        std::atomic<int64_t> tensors{0}, bytes{0}, entered_ns{0}, agreed_ns{0}, finished_ns{0};
        std::atomic<int32_t> op{-1}, root{-1}, state{0};
        std::atomic<bool> described{false}, valid{true};
    };
    /// Applies `change` to the entry of `sequence` (if the ring still holds it).
    template <typename Change>
    void update(uint64_t sequence, Change change);
    Entry read(const Slot& slot) const;

    size_t capacity_;
    std::unique_ptr<Slot[]> ring_;  // slot = sequence % capacity_
    ReportDir reports_;
    int rank_, size_;
    const char* backend_;
    std::string communicator_;
};

}  // namespace ddp::trace
