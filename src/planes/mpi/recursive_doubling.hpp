// A small allreduce written with point-to-point messages (recursive
// doubling), for agreement's words and for small data.
//
// Why not MPI_Iallreduce: Open MPI's non-blocking allreduce takes 1.2 us on
// shared memory and 16 us over TCP for 16 bytes with the algorithm libddp
// sets for large buffers (Rabenseifner), against 0.4 us and 5 us for the
// blocking one; and that setting is process-wide. Recursive doubling needs
// log2(ranks) message rounds, each one latency (README, Design decisions).
//
// One message carries words reduced by MAX and, optionally, data reduced by
// any MPI operation, so that a small allreduce can travel inside agreement.
// Every rank combines in one order (the lower rank's operand first), so all
// ranks end with bitwise equal results.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "util/pending.hpp"

namespace ddp {

/// The most data bytes libddp's MPI allreduces send by recursive doubling:
/// the mpi plane's small buffers, and agreement's carried allreduce over the
/// MPI channel (one round for both instead of a round each). Above it the
/// plane's MPI_Iallreduce is faster; the two cross near 32 KiB.
constexpr int64_t recursive_doubling_max_bytes = 16384;

/// The data part of a message: `count` elements of `type` combined with `op`.
struct MessageData {
    int count = 0;
    MPI_Datatype type = MPI_BYTE;
    MPI_Op op = MPI_OP_NULL;
};

class RecursiveDoubling final : public Pending {
public:
    /// What runs when every round is done: the reduced words and data.
    using Finish = std::function<void(std::span<const uint64_t> words, std::span<const std::byte> data)>;

    /// Starts the allreduce of `words` (MAX) and `data` (as `spec` says) on
    /// `comm` with `tag`, which no other operation in flight may share.
    /// Peers' words and data may take up to `capacity` bytes. A peer whose
    /// message has another layout (it made a different call) sets every word
    /// to all ones, which libddp's (x, ~x) word pairs read as disagreement
    /// on every rank; the data is then meaningless.
    RecursiveDoubling(MPI_Comm comm, int rank, int size, int tag, std::span<const uint64_t> words,
                      std::span<const std::byte> data, MessageData spec, size_t capacity, Finish finish);
    ~RecursiveDoubling() override = default;

    bool test() override;

private:
    /// One message round with one peer; what is received is combined into
    /// this rank's message, or (the result, at the end) replaces it.
    struct Round {
        int peer;
        bool send, receive, replace;
    };
    void post(const Round& round);
    void absorb(const Round& round, int received_bytes);
    bool same_layout(int received_bytes) const;
    std::span<uint64_t> words();
    std::byte* data();

    MPI_Comm comm_;
    int rank_, tag_;
    size_t n_words_;
    MessageData spec_;
    Finish finish_;

    std::vector<Round> rounds_;
    size_t next_ = 0;       // the round in flight (or next to post)
    bool posted_ = false;
    std::vector<std::byte> message_;
    // Room for the longest message a peer may send, left unzeroed: MPI
    // writes it, and agreement's room is 16 KiB on every call.
    size_t room_ = 0;
    std::unique_ptr<std::byte[]> received_;
    MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // send, receive
};

}  // namespace ddp
