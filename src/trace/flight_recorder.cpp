#include "trace/flight_recorder.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

#include "trace/timeline.hpp"
#include "util/collective_kind.hpp"
#include "ddp/ddp.h"

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

namespace {

constexpr auto relaxed = std::memory_order_relaxed;

// The kernel's coarse monotonic clock: the last tick (a few ms apart), read in
// a third of the fine clock's time; a flight recorder needs milliseconds. It
// never runs ahead of CLOCK_MONOTONIC, so the two share one origin.
int64_t coarse_now_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity, std::string dir, int rank, int size, const char* backend,
                               std::string communicator)
    : capacity_(capacity),
      ring_(std::make_unique<Slot[]>(capacity)),
      reports_(std::move(dir)),
      rank_(rank),
      size_(size),
      backend_(backend),
      communicator_(std::move(communicator)) {}

// One writer at a time: the thread running the communicator's collective
// (the caller's, or the async worker's, handed over by the worker's queue).
template <typename Change>
void FlightRecorder::update(uint64_t sequence, Change change) {
    if (capacity_ == 0) return;
    Slot& slot = ring_[sequence % capacity_];
    const uint64_t version = slot.version.load(relaxed);
    slot.version.store(version + 1, relaxed);  // odd: a write is under way
    std::atomic_thread_fence(std::memory_order_release);
    change(slot);
    slot.version.store(version + 2, std::memory_order_release);
}

FlightRecorder::Entry FlightRecorder::read(const Slot& slot) const {
    // A dump must never wait for ever: after this many torn reads (two
    // writers at once, as a bucket's timeout beside a mismatch could make)
    // the last read is taken as it is.
    constexpr int max_tries = 1000;
    for (int tries = 1;; ++tries) {
        const uint64_t before = slot.version.load(std::memory_order_acquire);
        Entry entry;
        entry.sequence = slot.sequence.load(relaxed);
        entry.kind = slot.kind.load(relaxed);
        entry.label = slot.label.load(relaxed);
        entry.described = slot.described.load(relaxed);
        entry.summary = CallSummary{slot.valid.load(relaxed), slot.op.load(relaxed),     slot.root.load(relaxed),
                                    slot.tensors.load(relaxed), slot.bytes.load(relaxed), slot.hash.load(relaxed)};
        entry.entered_ns = slot.entered_ns.load(relaxed);
        entry.agreed_ns = slot.agreed_ns.load(relaxed);
        entry.finished_ns = slot.finished_ns.load(relaxed);
        entry.state = static_cast<CallState>(slot.state.load(relaxed));
        std::atomic_thread_fence(std::memory_order_acquire);
        if (((before & 1) == 0 && slot.version.load(relaxed) == before) || tries == max_tries) return entry;
    }
}

void FlightRecorder::entered(uint64_t sequence, uint64_t kind, uint64_t label) {
    const int64_t now = coarse_now_ns();
    update(sequence, [&](Slot& slot) {
        slot.sequence.store(sequence, relaxed);
        slot.kind.store(kind, relaxed);
        slot.label.store(label, relaxed);
        slot.described.store(false, relaxed);
        slot.entered_ns.store(now, relaxed);
        slot.agreed_ns.store(0, relaxed);
        slot.finished_ns.store(0, relaxed);
        slot.state.store(static_cast<int32_t>(CallState::entered), relaxed);
    });
}

namespace {
void store_summary(std::atomic<bool>& described, std::atomic<bool>& valid, std::atomic<int32_t>& op,
                   std::atomic<int32_t>& root, std::atomic<int64_t>& tensors, std::atomic<int64_t>& bytes,
                   std::atomic<uint64_t>& hash, const CallSummary& summary) {
    valid.store(summary.valid, relaxed);
    op.store(summary.op, relaxed);
    root.store(summary.root, relaxed);
    tensors.store(summary.tensors, relaxed);
    bytes.store(summary.bytes, relaxed);
    hash.store(summary.hash, relaxed);
    described.store(true, relaxed);
}
}  // namespace

void FlightRecorder::described(uint64_t sequence, const CallSummary& summary) {
    update(sequence, [&](Slot& s) {
        if (s.sequence.load(relaxed) == sequence)
            store_summary(s.described, s.valid, s.op, s.root, s.tensors, s.bytes, s.hash, summary);
    });
}

void FlightRecorder::agreed(uint64_t sequence) {
    const int64_t now = coarse_now_ns();
    update(sequence, [&](Slot& s) {
        if (s.sequence.load(relaxed) != sequence || s.agreed_ns.load(relaxed) != 0) return;
        s.agreed_ns.store(now, relaxed);
        if (s.state.load(relaxed) == static_cast<int32_t>(CallState::entered))
            s.state.store(static_cast<int32_t>(CallState::agreed), relaxed);
    });
}

void FlightRecorder::ended(uint64_t sequence, bool failed) {
    const int64_t now = coarse_now_ns();
    update(sequence, [&](Slot& s) {
        if (s.sequence.load(relaxed) != sequence || s.finished_ns.load(relaxed) != 0) return;
        s.finished_ns.store(now, relaxed);
        const auto state = static_cast<CallState>(s.state.load(relaxed));
        const bool invalid = s.described.load(relaxed) && !s.valid.load(relaxed);  // fails after it ends
        if (!failed && !invalid)
            s.state.store(static_cast<int32_t>(CallState::finished), relaxed);
        else if (state == CallState::entered || state == CallState::agreed)
            s.state.store(static_cast<int32_t>(CallState::failed), relaxed);
    });
}

void FlightRecorder::mark(uint64_t sequence, CallState state) {
    update(sequence, [&](Slot& s) {
        if (s.sequence.load(relaxed) == sequence) s.state.store(static_cast<int32_t>(state), relaxed);
    });
}

std::string FlightRecorder::json(const std::string& reason) const {
    std::vector<Entry> entries;
    for (size_t i = 0; i < capacity_; ++i)
        if (Entry entry = read(ring_[i]); entry.sequence != 0) entries.push_back(entry);
    // Steady-clock times as Unix time, for dumps from several machines.
    const int64_t unix_minus_steady = unix_us() * 1000 - steady_now_ns();
    auto unix_of = [&](int64_t steady_ns) { return steady_ns == 0 ? 0LL : (steady_ns + unix_minus_steady) / 1000; };
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.sequence < b.sequence; });
    char head[256];
    std::snprintf(head, sizeof head,
                  "{\"flight_recorder\":1,\"writer\":\"libddp %s\",\"rank\":%d,\"size\":%d,\"backend\":\"%s\","
                  "\"capacity\":%zu,\"dumped_unix_us\":%lld,",
                  ddp_version_string(), rank_, size_, backend_, capacity_, static_cast<long long>(unix_us()));
    std::string out = head;
    if (!communicator_.empty()) out += "\"communicator\":\"" + escaped(communicator_) + "\",";
    out += "\"reason\":\"" + escaped(reason) + "\",\"calls\":[";
    for (size_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        char line[512];
        std::snprintf(line, sizeof line,
                      "%s{\"seq\":%llu,\"kind\":\"%s\",\"state\":\"%s\",\"entered_unix_us\":%lld,"
                      "\"agreed_unix_us\":%lld,\"finished_unix_us\":%lld",
                      i == 0 ? "" : ",", static_cast<unsigned long long>(e.sequence), kind_name(e.kind),
                      state_name(e.state), static_cast<long long>(unix_of(e.entered_ns)),
                      static_cast<long long>(unix_of(e.agreed_ns)), static_cast<long long>(unix_of(e.finished_ns)));
        out += line;
        // "call": the user's number for it; a binding's own call is marked
        // and carries the number of the user's call before it.
        const CallLabel label = CallLabel::from_word(e.label);
        out += ",\"call\":" + std::to_string(label.number) + (label.for_binding ? ",\"binding\":true" : "");
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

std::string FlightRecorder::dump(const std::string& reason, const std::string& file) const {
    if (!file.empty()) {
        write_file(file, json(reason));
        return file;
    }
    // A sub-communicator's file carries its name, so that it does not
    // overwrite the world's.
    const std::string tag = file_tag(communicator_);
    return reports_.write("ddp-flight-recorder." + (tag.empty() ? "" : tag + ".") + "rank" + std::to_string(rank_) +
                              ".json",
                          json(reason));
}

}  // namespace ddp::trace
