// Several ranks of one group in one process, one thread each
// (ddp_init_local): what their channels and their in-process plane share.
// Ranks meet in rounds: every rank's k-th exchange of a lane (control
// messages, data operations) is round k of that lane, since every rank
// starts its operations in the same order. A round is made by the first
// rank to reach it and dropped once every rank has left it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <utility>
#include <vector>

#include "control/channel.hpp"
#include "planes/capabilities.hpp"
#include "planes/exchange.hpp"
#include "planes/shm/doorbell.hpp"

namespace ddp::local {

/// What every rank of a data round must have started alike.
struct Shape {
    DataOp op = DataOp::allreduce;
    int64_t count = 0;  ///< elements (broadcast: bytes)
    ddp_dtype dtype = DDP_DTYPE_U8;
    int64_t detail = 0;  ///< the reduction, the root, or both
    bool operator==(const Shape&) const = default;
};

/// One meeting of every rank. A rank writes its own slots, then counts
/// itself in `arrived` (release); a rank that reads `arrived` equal to the
/// group's size (acquire) may read every slot.
struct Round {
    explicit Round(int size)
        : words(static_cast<size_t>(size)), bytes(static_cast<size_t>(size)), send(static_cast<size_t>(size)),
          recv(static_cast<size_t>(size)), shapes(static_cast<size_t>(size)),
          exchanges(static_cast<size_t>(size)) {}
    std::vector<std::vector<uint64_t>> words;   ///< control: each rank's words
    std::vector<std::vector<std::byte>> bytes;  ///< control: each rank's small buffer to reduce
    std::vector<const std::byte*> send;         ///< data: each rank's input
    std::vector<std::byte*> recv;               ///< data: each rank's output (in place: the input)
    std::vector<Shape> shapes;                  ///< data: each rank's operation
    /// Data: each rank's sends and receives (DataOp::exchange), kept by the
    /// round: a peer may read them after the rank's own operation is gone.
    std::vector<std::shared_ptr<const Exchange>> exchanges;
    std::atomic<int> arrived{0};
    std::atomic<int> finished{0};  ///< data: ranks that did their part (peers may write until all have)
    std::atomic<int> left{0};
    /// Data: a rank reads and writes its peers' buffers only while holding
    /// this shared and finding the round not withdrawn; a rank that stopped
    /// taking part (it gave up, or aborted) withdraws every open round under
    /// it exclusively, so that no peer touches its buffers once it returned.
    std::shared_mutex working;
    bool withdrawn = false;  ///< under `working`
};

enum class Lane { control, data };

class Group {
public:
    explicit Group(int size) : size_(size), status_sources_(static_cast<size_t>(size)) {}
    int size() const { return size_; }

    /// Round `number` of `lane`, made by the first rank to ask for it.
    std::shared_ptr<Round> round(Lane lane, uint64_t number);
    /// This rank is done with the round; the last to leave drops it.
    void leave(Lane lane, uint64_t number, Round& round);

    /// Counts `who` in (`arrived` or `finished`). A waiter waits for every
    /// rank to count in, so only the last one wakes the sleeping peers: a
    /// round rings once, not once per rank (n wake-ups each time).
    void count_in(std::atomic<int>& who) {
        if (who.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) doorbell_.ring();
    }
    /// Sleeps until a peer counts itself in somewhere, or `until`, unless `moved()`.
    bool sleep_unless(const std::function<bool()>& moved, Clock::time_point until) {
        return doorbell_.sleep_unless(moved, until);
    }

    /// What rank `rank` is doing, read from its control plane (any thread);
    /// an empty source once the rank is gone.
    void set_status_source(int rank, std::function<PeerStatus()> source);
    std::optional<PeerStatus> status_of(int rank);

    /// Abort notices, as every peer of `notice.from_rank` receives them.
    /// One that stops a rank (anything but finalizing) withdraws every open
    /// data round, and every later one: the group is broken.
    void post_notice(const AbortNotice& notice);
    /// The notice rank `rank` has received, if any: the first, except that
    /// a peer that stopped outranks one that only finalized.
    std::optional<AbortNotice> notice_for(int rank);

    /// The group of the `size` ranks passing `color` to this group's split
    /// number `split` (every rank numbers its splits alike): made by the
    /// first of them to ask, forgotten once all have it.
    std::shared_ptr<Group> child(uint64_t split, int color, int size);

private:
    const int size_;
    alignas(8) std::byte doorbell_words_[8] = {};
    shm::Doorbell doorbell_{doorbell_words_};
    std::mutex mutex_;
    std::map<std::pair<Lane, uint64_t>, std::shared_ptr<Round>> rounds_;  // under mutex_
    std::vector<std::function<PeerStatus()>> status_sources_;             // under mutex_
    std::vector<AbortNotice> notices_;                                     // under mutex_, in arrival order
    bool broken_ = false;                                                  // under mutex_
    struct Child {
        std::shared_ptr<Group> group;
        int taken = 0;
    };
    std::map<std::pair<uint64_t, int>, Child> children_;  // under mutex_
};

}  // namespace ddp::local
