// Point-to-point bytes, the one data operation that knows no collective
// (Gloo's shape): a rank lists what it sends to which ranks and what it
// receives from which, and a plane that runs `DataOp::exchange` moves them.
// A collective made of sends and receives (alltoall) is written once, in
// core, over this; no plane learns it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ddp {

/// `bytes` at `data` to rank `peer`.
struct Send {
    int peer;
    const std::byte* data;
    size_t bytes;
};

/// `bytes` from rank `peer` into `data`.
struct Receive {
    int peer;
    std::byte* data;
    size_t bytes;
};

/// One rank's part of an exchange. Rank a's k-th send to rank b meets rank
/// b's k-th receive from rank a, and both name the same byte count. A rank
/// may name itself. Receives do not overlap each other or the sends.
struct Exchange {
    std::vector<Send> sends;
    std::vector<Receive> receives;
    /// At least the bytes of every rank's sends to any one rank, together;
    /// the same on every rank (a plane that moves every pair's bytes in
    /// steps of one size, the shared-memory plane, counts its steps by it).
    size_t largest = 0;

    size_t bytes_sent() const {
        size_t total = 0;
        for (const Send& send : sends) total += send.bytes;
        return total;
    }
};

/// A receive and the send that meets it.
struct Meeting {
    const Receive* receive;
    const Send* send;
};

/// For ranks whose exchanges lie in one process (`exchanges[i]` is rank
/// `first_rank + i`'s): each receive of `exchanges[receiver]` from one of
/// them, with the send that meets it. Receives from ranks outside are left
/// to the caller. A receive no send meets (missing, another byte count), or
/// a send to the receiver no receive meets, is DDP_ERR_INTERNAL: the
/// collectives above list them alike on every rank.
std::vector<Meeting> meetings_of(std::span<const Exchange* const> exchanges, int first_rank, size_t receiver);

}  // namespace ddp
