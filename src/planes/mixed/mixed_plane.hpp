// The host plane of a group across processes x threads: each operation is
// a chain (chain.hpp) of the threads meeting in their process's memory
// (the in-process plane of a first local group), thread 0 of each process
// crossing to the other processes (through the shared-memory plane where
// they share one node and it runs the step, else the mpi plane; the process
// link picks per step), and the threads meeting
// again (a second local group, so that its rounds keep one order however
// the first steps end). Rank process x threads + i is thread i.
#pragma once

#include <memory>

#include "planes/host_plane.hpp"
#include "planes/local/in_process_plane.hpp"
#include "planes/mixed/chain.hpp"
#include "planes/mixed/process_link.hpp"

namespace ddp::mixed {

/// What one rank's chains share: its gates, so that its process meets the
/// others, and its threads meet again, in the order it made its chains.
struct Gates {
    Gate processes;  ///< thread 0's steps to the other processes (control and data alike)
    Gate again;      ///< the second meetings of the threads
};

class MixedPlane final : public HostPlane {
public:
    /// `first`, `again`: this thread's in-process planes of the two local groups.
    MixedPlane(std::shared_ptr<ProcessLink> link, int thread, local::InProcessPlane& first,
               local::InProcessPlane& again, Gates& gates)
        : link_(std::move(link)), thread_(thread), first_(first), again_(again), gates_(gates) {}

    const char* name() const override { return "mixed"; }
    std::span<const Capability> capabilities() const override;
    /// The other threads and processes carry an operation on while this one starts the next.
    bool overlaps_operations() const override { return true; }

    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override;
    std::unique_ptr<Pending> start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) override;
    std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) override;
    std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) override;
    std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                  ddp_op op) override;
    std::unique_ptr<Pending> start_exchange(Exchange exchange) override;

private:
    bool leads() const { return thread_ == 0; }
    int threads() const { return link_->threads(); }
    int process() const { return link_->process(); }
    /// On thread 0, every thread's exchange at hand: copies what the
    /// process's threads send each other, and returns what crosses to the
    /// other processes as one exchange between processes.
    Exchange moved_within_process(std::span<const Exchange* const> by_thread) const;
    /// A step of thread 0 to the other processes, in its turn.
    Chain::Step across(std::function<std::unique_ptr<Pending>()> start) {
        return Chain::step(gates_.processes, std::move(start));
    }
    /// A second meeting of the threads, in its turn.
    Chain::Step meet_again(std::function<std::unique_ptr<Pending>()> start) {
        return Chain::step(gates_.again, std::move(start));
    }

    std::shared_ptr<ProcessLink> link_;
    int thread_;
    local::InProcessPlane& first_;
    local::InProcessPlane& again_;
    Gates& gates_;
};

}  // namespace ddp::mixed
