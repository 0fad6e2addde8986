// Where agreement's rounds travel (control/agreement.cpp). Every collective
// starts with one, so its latency is the floor of a small call's time. The
// control channel is the default route; a host plane that knows a faster
// one between its ranks (shared memory within a node: planes/shm/) offers
// it, and the communicator sends the rounds that way.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "ddp/ddp.h"
#include "util/pending.hpp"

namespace ddp {

/// The words of agreement's messages (control/agreement.cpp), which carry
/// up to a route's carried_capacity() bytes beside them.
constexpr size_t max_agreement_words = 4;

/// The most data bytes a route carries unless it says otherwise: a
/// latency-bound message on every transport. The MPI channel carries what
/// its plane would send in the same kind of rounds (planes/mpi), the shm
/// route what fits its slots (planes/shm).
constexpr int64_t max_carried_bytes = 2048;

class AgreementRoute {
public:
    virtual ~AgreementRoute() = default;

    /// What the timeline and messages call the route ("mpi", "shm").
    virtual const char* name() const = 0;

    /// The most data bytes start_max_u64_carrying takes beside the words.
    virtual int64_t carried_capacity() const { return max_carried_bytes; }

    /// Element-wise maximum of `values` across ranks, written back into
    /// `values` when the Pending finishes; when `carried` is not null it
    /// also allreduces `count` elements there (in place, element-wise `op`,
    /// at most carried_capacity() bytes) in the same messages, so that a small
    /// allreduce costs agreement's round trip and no other. The data means
    /// something only if the words show that every rank passed equal words.
    /// The route works on its own copies, so `values` and `carried` may go
    /// away if the Pending is abandoned.
    virtual std::unique_ptr<Pending> start_max_u64_carrying(std::span<uint64_t> values, void* carried, int64_t count,
                                                            ddp_dtype dtype, ddp_op op) = 0;
};

}  // namespace ddp
