#include "planes/mpi/recursive_doubling.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "planes/mpi/mpi_check.hpp"

namespace ddp {

namespace {

// A message: its word count, the words, then the data bytes.
constexpr size_t header_bytes = sizeof(uint64_t);

// The rank that stands for position `v` among the power-of-two participants:
// in the first 2 * remainder ranks the odd ones take part, the rest all do.
int rank_of_position(int v, int remainder) { return v < remainder ? 2 * v + 1 : v + remainder; }

}  // namespace

RecursiveDoubling::RecursiveDoubling(MPI_Comm comm, int rank, int size, int tag, std::span<const uint64_t> words,
                                     std::span<const std::byte> data, MessageData spec, size_t capacity,
                                     Finish finish)
    : comm_(comm), rank_(rank), tag_(tag), n_words_(words.size()), spec_(spec), finish_(std::move(finish)) {
    message_.resize(header_bytes + words.size_bytes() + data.size());
    const uint64_t n_words = words.size();
    std::memcpy(message_.data(), &n_words, header_bytes);
    if (!words.empty()) std::memcpy(message_.data() + header_bytes, words.data(), words.size_bytes());
    if (!data.empty()) std::memcpy(this->data(), data.data(), data.size());
    room_ = header_bytes + std::max(capacity, words.size_bytes() + data.size());
    received_ = std::make_unique_for_overwrite<std::byte[]>(room_);

    int power = 1;
    while (power * 2 <= size) power *= 2;
    const int remainder = size - power;
    if (rank < 2 * remainder && rank % 2 == 0) {
        // Folded away: hand the message to the odd neighbour, get the result back.
        rounds_ = {{rank + 1, true, false, false}, {rank + 1, false, true, true}};
    } else {
        const bool folds = rank < 2 * remainder;
        const int position = folds ? rank / 2 : rank - remainder;
        if (folds) rounds_.push_back({rank - 1, false, true, false});
        for (int mask = 1; mask < power; mask <<= 1)
            rounds_.push_back({rank_of_position(position ^ mask, remainder), true, true, false});
        if (folds) rounds_.push_back({rank - 1, true, false, false});
    }
    if (!rounds_.empty()) post(rounds_.front());  // on the wire now, before the first test
}

std::span<uint64_t> RecursiveDoubling::words() {
    return {reinterpret_cast<uint64_t*>(message_.data() + header_bytes), n_words_};
}

std::byte* RecursiveDoubling::data() { return message_.data() + header_bytes + n_words_ * sizeof(uint64_t); }

void RecursiveDoubling::post(const Round& round) {
    if (round.send)
        check(MPI_Isend(message_.data(), static_cast<int>(message_.size()), MPI_BYTE, round.peer, tag_, comm_,
                        &requests_[0]),
              "MPI_Isend");
    if (round.receive)
        check(MPI_Irecv(received_.get(), static_cast<int>(room_), MPI_BYTE, round.peer, tag_, comm_,
                        &requests_[1]),
              "MPI_Irecv");
    posted_ = true;
}

bool RecursiveDoubling::same_layout(int received_bytes) const {
    return static_cast<size_t>(received_bytes) == message_.size() &&
           std::memcmp(received_.get(), message_.data(), header_bytes) == 0;
}

void RecursiveDoubling::absorb(const Round& round, int received_bytes) {
    if (!same_layout(received_bytes)) {
        std::fill(words().begin(), words().end(), ~uint64_t{0});
        return;
    }
    if (round.replace) {
        std::memcpy(message_.data(), received_.get(), message_.size());
        return;
    }
    const auto* theirs = reinterpret_cast<const uint64_t*>(received_.get() + header_bytes);
    for (size_t i = 0; i < n_words_; ++i) words()[i] = std::max(words()[i], theirs[i]);
    if (spec_.count == 0) return;
    // The lower rank's operand first on every rank: MPI_Reduce_local(in, inout)
    // makes inout = in (op) inout.
    std::byte* their_data = received_.get() + (data() - message_.data());
    if (round.peer < rank_) {
        check(MPI_Reduce_local(their_data, data(), spec_.count, spec_.type, spec_.op), "MPI_Reduce_local");
    } else {
        check(MPI_Reduce_local(data(), their_data, spec_.count, spec_.type, spec_.op), "MPI_Reduce_local");
        std::memcpy(data(), their_data, message_.size() - (data() - message_.data()));
    }
}

bool RecursiveDoubling::test() {
    while (next_ < rounds_.size()) {
        const Round& round = rounds_[next_];
        if (!posted_) post(round);
        int done = 0;
        MPI_Status statuses[2];
        const int code = MPI_Testall(2, requests_, &done, statuses);
        if (code == MPI_ERR_IN_STATUS && statuses[1].MPI_ERROR == MPI_ERR_TRUNCATE)
            fail(DDP_ERR_BACKEND, "rank " + std::to_string(round.peer) +
                                      " sent a longer message than this call expects: the ranks are not making "
                                      "the same collective");
        check(code, "MPI_Test");
        if (!done) return false;
        if (round.receive) {
            int received_bytes = 0;
            check(MPI_Get_count(&statuses[1], MPI_BYTE, &received_bytes), "MPI_Get_count");
            absorb(round, received_bytes);
        }
        posted_ = false;
        ++next_;
    }
    if (finish_) {
        const size_t data_offset = data() - message_.data();
        finish_(words(), std::span(message_).subspan(data_offset));
        finish_ = nullptr;
    }
    return true;
}

}  // namespace ddp
