// A host data plane: moves tensors' bytes in host memory between the ranks
// of a communicator, one contiguous buffer per operation. Each plane lists
// the steps it implements in a table next to its code
// (planes/capabilities.hpp); the communicator's priority list
// (planes/plane_list.hpp) gives each step to the first plane whose table
// covers it. An operation a plane lacks says DDP_ERR_UNSUPPORTED (c10d's
// model, planes/capabilities.hpp's `lacks`), so a new collective is added
// to the planes that can run it and a new plane implements only what it
// can do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "control/agreement_route.hpp"
#include "planes/capabilities.hpp"
#include "planes/exchange.hpp"
#include "ddp/ddp.h"
#include "util/pending.hpp"

namespace ddp {

/// Where one member of a fused step lies in the caller's memory.
struct Piece {
    std::byte* data;
    size_t bytes;
};

class HostPlane {
public:
    virtual ~HostPlane() = default;
    virtual const char* name() const = 0;

    /// What this plane implements (host memory only). It must be the same
    /// table on every rank, so that every rank gives a step to the same plane.
    virtual std::span<const Capability> capabilities() const = 0;
    /// Whether the table covers `op` on `bytes` bytes of `dtype` reduced
    /// with `reduction` (SUM, PROD, MIN or MAX; ignored by the ops that do
    /// not reduce).
    bool runs(DataOp op, ddp_dtype dtype, ddp_op reduction, int64_t bytes) const {
        return covers(capabilities(), op, dtype, reduction, Memory::host, bytes);
    }

    // Each returns nullptr when the operation finished at once.
    /// In-place allreduce.
    virtual std::unique_ptr<Pending> start_allreduce(void* /*data*/, int64_t /*count*/, ddp_dtype, ddp_op) {
        lacks(name(), DataOp::allreduce);
    }
    /// Whether start_allreduce_pieces runs here: a plane that copies
    /// through buffers of its own anyway (shm) gathers the members of a
    /// fused step while copying in and scatters while copying out, which
    /// spares the caller its packing and unpacking.
    virtual bool gathers_pieces() const { return false; }
    /// Whether an operation started while another of this plane's is still
    /// in flight runs alongside it, so that the plan runner keeps two steps
    /// in flight: true where operations move on without the caller (the
    /// plane's own threads, the peers' copying). A plane whose operations
    /// move only while the caller waits on them gains nothing from a second
    /// one and may lose (the mpi plane, mpi_plane.cpp): the plan runner and
    /// the reducer then finish one of its operations before they start the
    /// next on it (one on another plane may still be in flight).
    virtual bool overlaps_operations() const { return false; }
    /// In-place allreduce of `count` elements lying in `pieces`, back to
    /// back as if one buffer. The plane keeps its own copy of the list.
    virtual std::unique_ptr<Pending> start_allreduce_pieces(std::span<const Piece> /*pieces*/, int64_t /*count*/,
                                                            ddp_dtype, ddp_op) {
        lacks(name(), DataOp::allreduce);
    }
    /// In-place reduce into root's buffer; other ranks' buffers are unchanged.
    virtual std::unique_ptr<Pending> start_reduce(void* /*data*/, int64_t /*count*/, ddp_dtype, ddp_op, int /*root*/) {
        lacks(name(), DataOp::reduce);
    }
    virtual std::unique_ptr<Pending> start_broadcast(void* /*data*/, int64_t /*bytes*/, int /*root*/) {
        lacks(name(), DataOp::broadcast);
    }
    /// Every rank's `count` elements of `send`, in rank order, into `recv`
    /// (size × count elements). `send` may be recv + rank × count (in
    /// place); otherwise the two do not overlap.
    virtual std::unique_ptr<Pending> start_allgather(const void* /*send*/, void* /*recv*/, int64_t /*count*/,
                                                     ddp_dtype) {
        lacks(name(), DataOp::allgather);
    }
    /// Reduces every rank's `send` (size × count elements) with `op` and
    /// leaves block rank of the result, `count` elements, in `recv`. The
    /// buffers do not overlap.
    virtual std::unique_ptr<Pending> start_reduce_scatter(const void* /*send*/, void* /*recv*/, int64_t /*count*/,
                                                          ddp_dtype, ddp_op) {
        lacks(name(), DataOp::reduce_scatter);
    }
    /// This rank's sends and receives (planes/exchange.hpp). The plane
    /// keeps its own copy of the lists.
    virtual std::unique_ptr<Pending> start_exchange(Exchange /*exchange*/) { lacks(name(), DataOp::exchange); }

    /// A faster route for agreement's rounds between this plane's ranks
    /// than the control channel, if it has one (it lives as long as the plane).
    virtual AgreementRoute* agreement_route() { return nullptr; }

    /// Releases what the plane holds of its own (a plane that is its
    /// transport's has nothing: the transport goes after it), before the
    /// transport goes; `peers_present` as Transport::finalize.
    virtual void finalize(bool /*peers_present*/) {}
};

}  // namespace ddp
