// How a round goes. Per rank the area holds two flags on cache lines of
// their own (the last round it posted its words for, and the last it finished
// reading) and two slots of agreement's largest message (its words and a
// carried allreduce). Rounds are numbered in the order they start, the same
// on every rank. Round r: once every rank has finished reading round r - 2,
// a rank writes its message into its slot r % 2 and posts r; once every rank
// has posted r, it takes the maximum of every word and combines the carried
// elements in rank order (the same bits on every rank, as the shm plane),
// and says it has read round r. Nothing blocks: test() goes as far as the
// flags allow, and the control plane holds the round to the call's
// deadline, so a dead peer ends in the same timeout as through MPI.
#include "planes/shm/shm_agreement.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "control/channel.hpp"
#include "planes/shm/combine.hpp"
#include "planes/shm/progress_flags.hpp"
#include "planes/shm/start_order.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp::shm {

namespace {

constexpr size_t line = cache_line;
/// The most bytes a round carries beside its words. Measured (2 ranks,
/// /tmp probe of 2-16 KiB allreduces against the shm plane's own step):
/// see carried_capacity below.
constexpr int64_t carried_bytes = 4 * 1024;
constexpr size_t words_bytes = max_agreement_words * sizeof(uint64_t);
constexpr size_t slot_bytes = (words_bytes + static_cast<size_t>(carried_bytes) + line - 1) / line * line;
constexpr size_t per_rank_bytes = 2 * line + 2 * slot_bytes;

enum Flag : size_t { posted = 0, consumed = 1 };

class Round;

/// The area and the rounds started on it, in start order; shared with
/// the rounds, so one a timeout abandoned keeps the mapping alive.
class Area {
public:
    Area(std::shared_ptr<const Segment> segment, size_t offset, Doorbell doorbell, int rank, int size)
        : segment_(std::move(segment)), base_(segment_->data() + offset),
          flags_(base_, per_rank_bytes, doorbell, rank, size),
          rank_(rank), size_(size) {}

    int rank() const { return rank_; }
    int size() const { return size_; }
    void set(Flag which, uint64_t round) { flags_.set(which, round); }
    bool sleep_unless(const std::function<bool()>& moved, Clock::time_point until) {
        return flags_.sleep_unless(moved, until);
    }
    bool all_reached(Flag which, uint64_t round) const { return flags_.all_reached(which, round); }
    std::byte* slot(int rank, uint64_t round) const {
        return base_ + static_cast<size_t>(rank) * per_rank_bytes + 2 * line + (round % 2) * slot_bytes;
    }

    StartOrder<Round> started;
    uint64_t next_round = 1;  ///< the number the next round gets (under started's lock)

private:
    std::shared_ptr<const Segment> segment_;
    std::byte* base_;
    ProgressFlags flags_;
    int rank_, size_;
};

class Round final : public Pending {
public:
    Round(std::shared_ptr<Area> area, std::span<uint64_t> values, void* carried, int64_t count, ddp_dtype dtype,
          ddp_op op)
        : area_(std::move(area)), values_(values), carried_(static_cast<std::byte*>(carried)),
          count_(carried ? count : 0), dtype_(dtype), op_(op), bytes_(static_cast<size_t>(count_) * element_size(dtype)) {
        if (values.size() > max_agreement_words || bytes_ > static_cast<size_t>(carried_bytes))
            fail(DDP_ERR_INTERNAL, "an agreement message larger than the shared-memory route's slot");
        // Copies: a later round's test() may drive this one after its
        // caller abandoned it and its buffers are gone.
        std::copy(values.begin(), values.end(), words_.begin());
        if (bytes_ > 0) std::memcpy(payload_.data(), carried_, bytes_);
    }
    ~Round() override { area_->started.remove(this); }
    Round(const Round&) = delete;
    Round& operator=(const Round&) = delete;

    bool done() const { return done_; }
    bool test() override {
        if (!area_->started.drive(*this)) return false;
        // Only the caller's own test() writes into its buffers.
        std::copy_n(words_.begin(), values_.size(), values_.begin());
        if (bytes_ > 0) std::memcpy(carried_, payload_.data(), bytes_);
        return true;
    }
    bool sleep(Clock::time_point until) override {
        return area_->sleep_unless([this] { return test(); }, until);
    }

private:
    friend class StartOrder<Round>;

    bool advance() {
        Area& area = *area_;
        if (round_ == 0) round_ = area.next_round++;
        if (!posted_) {
            if (!area.all_reached(consumed, round_ < 2 ? 0 : round_ - 2)) return false;
            std::byte* mine = area.slot(area.rank(), round_);
            std::memcpy(mine, words_.data(), values_.size() * sizeof(uint64_t));
            if (bytes_ > 0) std::memcpy(mine + words_bytes, payload_.data(), bytes_);
            area.set(posted, round_);
            posted_ = true;
        }
        if (!area.all_reached(posted, round_)) return false;
        for (int rank = 0; rank < area.size(); ++rank) {
            const std::byte* theirs = area.slot(rank, round_);
            for (size_t w = 0; w < values_.size(); ++w) {
                uint64_t word;
                std::memcpy(&word, theirs + w * sizeof(uint64_t), sizeof word);
                words_[w] = std::max(words_[w], word);
            }
        }
        if (bytes_ > 0) {
            // Rank order, from the slots (this rank's own input is there too).
            shm::combine(payload_.data(), area.slot(0, round_) + words_bytes, area.slot(1, round_) + words_bytes,
                         count_, dtype_, op_);
            for (int rank = 2; rank < area.size(); ++rank)
                shm::combine(payload_.data(), payload_.data(), area.slot(rank, round_) + words_bytes, count_, dtype_,
                             op_);
        }
        area.set(consumed, round_);
        done_ = true;
        return true;
    }

    std::shared_ptr<Area> area_;
    std::span<uint64_t> values_;  ///< the caller's, as `carried_`: written by its own test() only
    std::array<uint64_t, max_agreement_words> words_{};
    std::byte* carried_;
    int64_t count_;
    ddp_dtype dtype_;
    ddp_op op_;
    size_t bytes_;
    std::array<std::byte, carried_bytes> payload_;
    uint64_t round_ = 0;  ///< 0: not begun
    bool posted_ = false;
    bool done_ = false;
};

class ShmAgreement final : public AgreementRoute {
public:
    explicit ShmAgreement(std::shared_ptr<Area> area) : area_(std::move(area)) {}

    const char* name() const override { return "shm"; }
    int64_t carried_capacity() const override { return carried_bytes; }

    std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                    ddp_dtype dtype, ddp_op op) override {
        auto round = std::make_unique<Round>(area_, values, carried, count, dtype, op);
        area_->started.push(round.get());
        return round;
    }

private:
    std::shared_ptr<Area> area_;
};

}  // namespace

size_t agreement_area_bytes(int ranks) { return static_cast<size_t>(ranks) * per_rank_bytes; }

std::unique_ptr<AgreementRoute> make_shm_agreement(std::shared_ptr<const Segment> segment, size_t offset,
                                                   Doorbell doorbell, int rank, int size) {
    return std::make_unique<ShmAgreement>(std::make_shared<Area>(std::move(segment), offset, doorbell, rank, size));
}

}  // namespace ddp::shm
