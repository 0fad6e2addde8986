// The host plane of ranks that are threads of one process (ddp_init_local):
// each rank reads its peers' buffers where they lie. An allreduce is one
// pass over memory: rank r combines part r of every rank's buffer, in rank
// order (so every rank gets the same bits), and writes the result into
// part r of every buffer; no segment, no copy in between. The other
// operations copy straight from the peers' inputs into this rank's output
// (an exchange: each rank copies what its peers send it).
// Every operation ends when every rank has done its part, since until then
// peers read or write this rank's memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "planes/host_plane.hpp"
#include "planes/local/local_group.hpp"

namespace ddp::local {

class InProcessPlane final : public HostPlane {
public:
    InProcessPlane(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

    const char* name() const override { return "local"; }
    std::span<const Capability> capabilities() const override;
    /// The group's other threads carry an operation on while this one starts the next.
    bool overlaps_operations() const override { return true; }

    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override;
    std::unique_ptr<Pending> start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) override;
    std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) override;
    std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) override;
    std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                  ddp_op op) override;
    std::unique_ptr<Pending> start_exchange(Exchange exchange) override;

    /// What rank `root` does with every rank's exchange (by rank).
    using RootWork = std::function<void(std::span<const Exchange* const> exchanges)>;
    /// Every rank's exchange handed to rank `root`, which runs `work` on it
    /// once every rank is there; the others do nothing but wait until it
    /// has, since their buffers are its until then. Ranks whose receives
    /// overlap, or whose sends and receives between each other do not meet,
    /// are refused on every rank (peers numbered from `first_rank`: this
    /// plane's rank 0 in the wider group). How a group across processes x
    /// threads hands its threads' sends and receives to thread 0, which
    /// moves them (mixed_plane.cpp's exchange).
    std::unique_ptr<Pending> start_exchange_on_root(Exchange exchange, int first_rank, int root, RootWork work);

private:
    /// Joins this rank's next data round with its buffers (or `exchange`) and
    /// `shape`; `work` is its part once every rank is there (refused,
    /// DDP_ERR_INTERNAL, where the ranks' shapes differ).
    std::unique_ptr<Pending> start(const void* send, void* recv, Shape shape, std::function<void(Round&)> work,
                                   std::shared_ptr<const Exchange> exchange = nullptr);

    std::shared_ptr<Group> group_;
    int rank_;
    std::atomic<uint64_t> next_round_{0};  // the caller's thread and the async worker both start operations
};

}  // namespace ddp::local
