#include "planes/mixed/mixed_plane.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "planes/mixed/capabilities.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp::mixed {

namespace {

using Bytes = std::shared_ptr<std::vector<std::byte>>;

Bytes bytes_of(size_t n) { return std::make_shared<std::vector<std::byte>>(n); }

Bytes copy_of(const void* data, size_t n) {
    const auto* from = static_cast<const std::byte*>(data);
    return std::make_shared<std::vector<std::byte>>(from, from + n);
}

}  // namespace

std::span<const Capability> MixedPlane::capabilities() const { return mixed_capabilities; }

// The threads' sum on thread 0, the processes' sum there, then to every thread.
std::unique_ptr<Pending> MixedPlane::start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) {
    if (link_->processes() == 1) return first_.start_allreduce(data, count, dtype, op);
    const auto bytes = count * static_cast<int64_t>(element_size(dtype));
    std::vector<Chain::Step> steps;
    steps.push_back(Chain::step([=, this] { return first_.start_reduce(data, count, dtype, op, 0); }));
    if (leads()) steps.push_back(across([=, this] { return link_->plane_for(DataOp::allreduce, dtype, op, bytes).start_allreduce(data, count, dtype, op); }));
    steps.push_back(meet_again([=, this] { return again_.start_broadcast(data, bytes, 0); }));
    return Chain::start(std::move(steps));
}

// Into thread 0 of root's process, which keeps the sum in a copy of its
// buffer unless it is the root; then to the root's thread. Every other
// rank's buffer stays as it was.
std::unique_ptr<Pending> MixedPlane::start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) {
    if (link_->processes() == 1) return first_.start_reduce(data, count, dtype, op, root);
    const int to = root / threads(), at = root % threads();
    const auto bytes = static_cast<size_t>(count) * element_size(dtype);
    const bool is_root = process() == to && thread_ == at;
    Bytes scratch;
    void* mine = data;
    if (leads() && !is_root) {
        scratch = copy_of(data, bytes);
        mine = scratch->data();
    }
    std::vector<Chain::Step> steps;
    if (process() == to && at != 0 && !leads() && !is_root) scratch = bytes_of(bytes);  // received and dropped
    steps.push_back(Chain::step([=, this] { return first_.start_reduce(mine, count, dtype, op, 0); }));
    if (leads()) steps.push_back(across([=, this] { return link_->plane_for(DataOp::reduce, dtype, op, static_cast<int64_t>(bytes)).start_reduce(mine, count, dtype, op, to); }));
    if (process() == to && at != 0) {
        void* into = is_root ? data : scratch->data();
        steps.push_back(meet_again([=, this] { return again_.start_broadcast(into, static_cast<int64_t>(bytes), 0); }));
    }
    return Chain::start(std::move(steps), {scratch});
}

// From the root's thread to its process's thread 0, to every process's
// thread 0, to their threads.
std::unique_ptr<Pending> MixedPlane::start_broadcast(void* data, int64_t bytes, int root) {
    if (link_->processes() == 1) return first_.start_broadcast(data, bytes, root);
    const int from = root / threads(), at = root % threads();
    std::vector<Chain::Step> steps;
    if (process() == from) steps.push_back(Chain::step([=, this] { return first_.start_broadcast(data, bytes, at); }));
    if (leads()) steps.push_back(across([=, this] { return link_->plane_for(DataOp::broadcast, DDP_DTYPE_U8, DDP_OP_SUM, bytes).start_broadcast(data, bytes, from); }));
    if (process() != from) steps.push_back(meet_again([=, this] { return again_.start_broadcast(data, bytes, 0); }));
    return Chain::start(std::move(steps));
}

// Ranks are numbered process by process, so a process's threads fill one
// stretch of the result: gathered there first, then the stretches across
// processes, then the whole to every thread.
std::unique_ptr<Pending> MixedPlane::start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) {
    if (link_->processes() == 1) return first_.start_allgather(send, recv, count, dtype);
    const auto block = count * static_cast<int64_t>(element_size(dtype));
    auto* stretch = static_cast<std::byte*>(recv) + process() * threads() * block;
    const int64_t all = link_->processes() * threads() * block;
    std::vector<Chain::Step> steps;
    steps.push_back(Chain::step([=, this] { return first_.start_allgather(send, stretch, count, dtype); }));
    if (leads())
        steps.push_back(across([=, this] { return link_->plane_for(DataOp::allgather, dtype, DDP_OP_SUM, threads() * block).start_allgather(stretch, recv, threads() * count, dtype); }));
    steps.push_back(meet_again([=, this] { return again_.start_broadcast(recv, all, 0); }));
    return Chain::start(std::move(steps));
}

// The threads' sums of every block on thread 0, this process's blocks of
// the processes' sum there, then each thread takes its own. Every thread
// reduces from a copy of `send`: the caller's is read only, and threads may
// pass one buffer alike (the in-process plane refuses ranks' buffers that
// overlap).
std::unique_ptr<Pending> MixedPlane::start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                          ddp_op op) {
    if (link_->processes() == 1) return first_.start_reduce_scatter(send, recv, count, dtype, op);
    // This process's blocks travel as one block between the processes.
    if (threads() * count > std::numeric_limits<int>::max())
        fail(DDP_ERR_UNSUPPORTED, "reduce_scatter of " + std::to_string(count) + " elements per rank on " +
                                      std::to_string(threads()) + " threads per process: a process's blocks, " +
                                      std::to_string(threads() * count) + " elements, exceed one MPI count");
    const auto element = static_cast<int64_t>(element_size(dtype));
    const int64_t all = link_->processes() * threads() * count;
    Bytes sum = copy_of(send, static_cast<size_t>(all * element));
    void* mine = sum->data();
    Bytes blocks = bytes_of(static_cast<size_t>(threads() * count * element));
    std::vector<Chain::Step> steps;
    steps.push_back(Chain::step([=, this] { return first_.start_reduce(mine, all, dtype, op, 0); }));
    if (leads())
        steps.push_back(across([=, this] {
            return link_->plane_for(DataOp::reduce_scatter, dtype, op, static_cast<int64_t>(sum->size()))
                .start_reduce_scatter(sum->data(), blocks->data(), threads() * count, dtype, op);
        }));
    steps.push_back(meet_again(
        [=, this] { return again_.start_broadcast(blocks->data(), static_cast<int64_t>(blocks->size()), 0); }));
    steps.push_back(Chain::step([=, this]() -> std::unique_ptr<Pending> {
        std::memcpy(recv, blocks->data() + thread_ * count * element, static_cast<size_t>(count * element));
        return nullptr;
    }));
    return Chain::start(std::move(steps), {sum, blocks});
}

// Thread 0 moves its process's part: it takes every thread's sends and
// receives (their buffers stay where they lie), copies those between the
// process's own threads, and exchanges the rest with the other processes'
// threads 0 straight from and into the threads' buffers; the threads meet
// again once it has, since their buffers are its until then.
std::unique_ptr<Pending> MixedPlane::start_exchange(Exchange exchange) {
    if (link_->processes() == 1) return first_.start_exchange(std::move(exchange));
    auto between = std::make_shared<Exchange>();  // thread 0's, with the other processes
    std::vector<Chain::Step> steps;
    steps.push_back(Chain::step([=, this, mine = std::move(exchange)] {
        auto move = [=, this](std::span<const Exchange* const> by_thread) { *between = moved_within_process(by_thread); };
        return first_.start_exchange_on_root(mine, process() * threads(), 0, move);
    }));
    // Every process asks for the same plane: by `largest`, the same on all.
    if (leads())
        steps.push_back(across([=, this] {
            const auto bytes = static_cast<int64_t>(between->largest) * link_->processes();
            return link_->plane_for(DataOp::exchange, DDP_DTYPE_U8, DDP_OP_SUM, bytes).start_exchange(*between);
        }));
    steps.push_back(meet_again([=, this] { return again_.start_exchange(Exchange{}); }));
    return Chain::start(std::move(steps), {between});
}

Exchange MixedPlane::moved_within_process(std::span<const Exchange* const> by_thread) const {
    const int n = threads(), first = process() * n;
    for (size_t thread = 0; thread < by_thread.size(); ++thread)
        for (const Meeting& meeting : meetings_of(by_thread, first, thread))
            std::memcpy(meeting.receive->data, meeting.send->data, meeting.receive->bytes);
    // A process's messages to another go in the order of (sending thread,
    // receiving thread), which both processes know, and in each thread's own
    // order within that: the k-th send meets the k-th receive.
    struct Ordered {
        int sender, receiver;  // threads
        bool operator<(const Ordered& other) const {
            return std::pair(sender, receiver) < std::pair(other.sender, other.receiver);
        }
    };
    std::vector<std::pair<Ordered, Send>> sends;
    std::vector<std::pair<Ordered, Receive>> receives;
    for (int thread = 0; thread < n; ++thread) {
        for (const Send& send : by_thread[static_cast<size_t>(thread)]->sends)
            if (send.peer / n != process()) sends.push_back({{thread, send.peer % n}, {send.peer / n, send.data, send.bytes}});
        for (const Receive& receive : by_thread[static_cast<size_t>(thread)]->receives)
            if (receive.peer / n != process())
                receives.push_back({{receive.peer % n, thread}, {receive.peer / n, receive.data, receive.bytes}});
    }
    auto by_order = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::stable_sort(sends.begin(), sends.end(), by_order);
    std::stable_sort(receives.begin(), receives.end(), by_order);
    Exchange between;
    // Each thread's largest is the same: every thread of one process sends another's at most n x n of them.
    between.largest = static_cast<size_t>(n) * static_cast<size_t>(n) * by_thread.front()->largest;
    for (const auto& [order, send] : sends) between.sends.push_back(send);
    for (const auto& [order, receive] : receives) between.receives.push_back(receive);
    return between;
}

}  // namespace ddp::mixed
