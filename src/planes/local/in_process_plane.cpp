#include "planes/local/in_process_plane.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "planes/local/capabilities.hpp"
#include "planes/local/round_pending.hpp"
#include "planes/shm/combine.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp::local {

namespace {

/// Results are combined a tile at a time, on the stack (operations of one
/// rank may run on two threads at once), and then copied where they go.
constexpr size_t tile_bytes = 16 * 1024;

/// [first, end) of `part` when `n` elements are cut into `parts`.
std::pair<int64_t, int64_t> part_of(int64_t n, int parts, int part) {
    return {n * part / parts, n * (part + 1) / parts};
}

/// Every rank's `inputs[p] + first` (n elements) combined in rank order, a
/// tile at a time, each tile handed to `deliver(tile, element offset, count)`.
template <typename Deliver>
void combine_in_rank_order(std::span<const std::byte* const> inputs, int64_t first, int64_t n, ddp_dtype dtype,
                           ddp_op op, Deliver deliver) {
    alignas(64) std::byte tile[tile_bytes];
    const auto element = static_cast<int64_t>(element_size(dtype));
    const int64_t per_tile = static_cast<int64_t>(tile_bytes) / element;
    for (int64_t at = first; at < first + n; at += per_tile) {
        const int64_t length = std::min(per_tile, first + n - at);
        shm::combine_in_rank_order(tile, inputs, static_cast<size_t>(at * element), length, dtype, op);
        deliver(tile, at, length);
    }
}

/// Bytes of one rank's buffer.
struct Extent {
    const std::byte* first;
    size_t bytes;
    size_t rank;
    bool output;
};

/// Ranks must bring buffers of their own: where one rank's output overlaps
/// another rank's output or input, both would write it, or one would read
/// what the other writes. Every rank sees the same pointers, so every rank
/// refuses alike, before any writes.
void refuse_overlaps(std::vector<Extent> extents) {
    std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.first < b.first; });
    const Extent* reaching = nullptr;  // of those before, the one that ends last
    for (const Extent& extent : extents) {
        if (extent.bytes == 0) continue;
        if (reaching != nullptr && extent.first < reaching->first + reaching->bytes && extent.rank != reaching->rank &&
            (extent.output || reaching->output))
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "ranks " + std::to_string(std::min(extent.rank, reaching->rank)) + " and " +
                     std::to_string(std::max(extent.rank, reaching->rank)) +
                     " passed overlapping buffers; each rank of a group from ddp_init_local needs its own");
        if (reaching == nullptr || extent.first + extent.bytes > reaching->first + reaching->bytes) reaching = &extent;
    }
}

/// refuse_overlaps for every rank's `recv_bytes` output and `send_bytes`
/// input (0: the operation is in place).
void refuse_shared_buffers(const Round& round, size_t recv_bytes, size_t send_bytes) {
    std::vector<Extent> extents;
    for (size_t rank = 0; rank < round.recv.size(); ++rank) {
        extents.push_back({round.recv[rank], recv_bytes, rank, true});
        if (send_bytes > 0) extents.push_back({round.send[rank], send_bytes, rank, false});
    }
    refuse_overlaps(std::move(extents));
}

/// Every rank's exchange in the round, by rank.
std::vector<const Exchange*> exchanges_of(const Round& round) {
    std::vector<const Exchange*> exchanges;
    for (const std::shared_ptr<const Exchange>& exchange : round.exchanges) exchanges.push_back(exchange.get());
    return exchanges;
}

/// Every rank's meetings (meetings_of), by rank: every rank matches every
/// rank's sends and receives, so that a mismatch fails them all alike,
/// before any copy.
std::vector<std::vector<Meeting>> checked_meetings(const std::vector<const Exchange*>& exchanges, int first_rank) {
    std::vector<std::vector<Meeting>> by_rank;
    for (size_t rank = 0; rank < exchanges.size(); ++rank) by_rank.push_back(meetings_of(exchanges, first_rank, rank));
    return by_rank;
}

/// refuse_overlaps for every rank's receives and sends.
void refuse_shared_exchange_buffers(const Round& round) {
    std::vector<Extent> extents;
    for (size_t rank = 0; rank < round.exchanges.size(); ++rank) {
        for (const Receive& receive : round.exchanges[rank]->receives)
            extents.push_back({receive.data, receive.bytes, rank, true});
        for (const Send& send : round.exchanges[rank]->sends) extents.push_back({send.data, send.bytes, rank, false});
    }
    refuse_overlaps(std::move(extents));
}

/// Ranks meet in data round k because each starts its k-th operation there
/// (the caller's thread and the async worker number them in call order,
/// which agreement made the same on every rank). Each rank's round carries
/// its operation's shape, so that a numbering slip is an error, never one
/// rank's buffers combined with another operation's.
void refuse_different_operations(const Round& round, int rank, uint64_t number) {
    const auto& mine = round.shapes[static_cast<size_t>(rank)];
    for (size_t peer = 0; peer < round.shapes.size(); ++peer)
        if (round.shapes[peer] != mine)
            fail(DDP_ERR_INTERNAL,
                 "data operation #" + std::to_string(number + 1) + " of the local group is not the same on ranks " +
                     std::to_string(std::min<size_t>(peer, static_cast<size_t>(rank))) + " and " +
                     std::to_string(std::max<size_t>(peer, static_cast<size_t>(rank))) +
                     " (operation, count, type or root differ): a libddp bug; please report it");
}

}  // namespace

std::span<const Capability> InProcessPlane::capabilities() const { return local_capabilities; }

std::unique_ptr<Pending> InProcessPlane::start(const void* send, void* recv, Shape shape,
                                               std::function<void(Round&)> work,
                                               std::shared_ptr<const Exchange> exchange) {
    const uint64_t number = next_round_.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<Round> round = group_->round(Lane::data, number);
    round->send[static_cast<size_t>(rank_)] = static_cast<const std::byte*>(send);
    round->recv[static_cast<size_t>(rank_)] = static_cast<std::byte*>(recv);
    round->shapes[static_cast<size_t>(rank_)] = shape;
    round->exchanges[static_cast<size_t>(rank_)] = std::move(exchange);
    group_->count_in(round->arrived);
    auto checked = [rank = rank_, number, work = std::move(work)](Round& met) {
        refuse_different_operations(met, rank, number);
        work(met);
    };
    return std::make_unique<RoundPending>(group_, Lane::data, number, std::move(round), std::move(checked), true);
}

std::unique_ptr<Pending> InProcessPlane::start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) {
    return start(data, data, {DataOp::allreduce, count, dtype, op}, [this, count, dtype, op](Round& round) {
        const auto element = static_cast<int64_t>(element_size(dtype));
        refuse_shared_buffers(round, static_cast<size_t>(count * element), 0);
        const auto [first, end] = part_of(count, group_->size(), rank_);
        const std::vector<const std::byte*> inputs(round.recv.begin(), round.recv.end());
        combine_in_rank_order(inputs, first, end - first, dtype, op, [&](const std::byte* tile, int64_t at, int64_t n) {
            for (std::byte* buffer : round.recv) std::memcpy(buffer + at * element, tile, static_cast<size_t>(n * element));
        });
    });
}

std::unique_ptr<Pending> InProcessPlane::start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op,
                                                      int root) {
    const Shape shape{DataOp::reduce, count, dtype, static_cast<int64_t>(op) << 32 | root};
    return start(data, data, shape, [this, count, dtype, op, root](Round& round) {
        const auto element = static_cast<int64_t>(element_size(dtype));
        refuse_shared_buffers(round, static_cast<size_t>(count * element), 0);
        const auto [first, end] = part_of(count, group_->size(), rank_);
        const std::vector<const std::byte*> inputs(round.recv.begin(), round.recv.end());
        std::byte* target = round.recv[static_cast<size_t>(root)];
        combine_in_rank_order(inputs, first, end - first, dtype, op, [&](const std::byte* tile, int64_t at, int64_t n) {
            std::memcpy(target + at * element, tile, static_cast<size_t>(n * element));
        });
    });
}

std::unique_ptr<Pending> InProcessPlane::start_broadcast(void* data, int64_t bytes, int root) {
    return start(data, data, {DataOp::broadcast, bytes, DDP_DTYPE_U8, root}, [this, bytes, root](Round& round) {
        refuse_shared_buffers(round, static_cast<size_t>(bytes), 0);
        if (rank_ != root) std::memcpy(round.recv[static_cast<size_t>(rank_)], round.recv[static_cast<size_t>(root)],
                                       static_cast<size_t>(bytes));
    });
}

std::unique_ptr<Pending> InProcessPlane::start_allgather(const void* send, void* recv, int64_t count,
                                                         ddp_dtype dtype) {
    return start(send, recv, {DataOp::allgather, count, dtype, 0}, [this, count, dtype](Round& round) {
        const auto block = static_cast<size_t>(count) * element_size(dtype);
        refuse_shared_buffers(round, block * round.recv.size(), block);
        std::byte* out = round.recv[static_cast<size_t>(rank_)];
        for (size_t p = 0; p < round.send.size(); ++p)
            if (out + p * block != round.send[p]) std::memcpy(out + p * block, round.send[p], block);
    });
}

std::unique_ptr<Pending> InProcessPlane::start_reduce_scatter(const void* send, void* recv, int64_t count,
                                                              ddp_dtype dtype, ddp_op op) {
    return start(send, recv, {DataOp::reduce_scatter, count, dtype, op}, [this, count, dtype, op](Round& round) {
        const auto element = static_cast<int64_t>(element_size(dtype));
        refuse_shared_buffers(round, static_cast<size_t>(count * element),
                              static_cast<size_t>(count * element) * round.send.size());
        std::vector<const std::byte*> inputs;
        for (const std::byte* input : round.send) inputs.push_back(input + rank_ * count * element);
        std::byte* out = round.recv[static_cast<size_t>(rank_)];
        combine_in_rank_order(inputs, 0, count, dtype, op, [&](const std::byte* tile, int64_t at, int64_t n) {
            std::memcpy(out + at * element, tile, static_cast<size_t>(n * element));
        });
    });
}

std::unique_ptr<Pending> InProcessPlane::start_exchange(Exchange exchange) {
    return start(
        nullptr, nullptr, {DataOp::exchange, 0, DDP_DTYPE_U8, 0},
        [this](Round& round) {
            refuse_shared_exchange_buffers(round);
            const std::vector<std::vector<Meeting>> meetings = checked_meetings(exchanges_of(round), 0);
            for (const Meeting& meeting : meetings[static_cast<size_t>(rank_)])
                std::memcpy(meeting.receive->data, meeting.send->data, meeting.receive->bytes);
        },
        std::make_shared<const Exchange>(std::move(exchange)));
}

std::unique_ptr<Pending> InProcessPlane::start_exchange_on_root(Exchange exchange, int first_rank, int root,
                                                                RootWork work) {
    return start(
        nullptr, nullptr, {DataOp::exchange, 0, DDP_DTYPE_U8, int64_t{1} << 32 | static_cast<uint32_t>(root)},
        [this, first_rank, root, work = std::move(work)](Round& round) {
            refuse_shared_exchange_buffers(round);
            const std::vector<const Exchange*> exchanges = exchanges_of(round);
            checked_meetings(exchanges, first_rank);
            if (rank_ == root) work(exchanges);
        },
        std::make_shared<const Exchange>(std::move(exchange)));
}

}  // namespace ddp::local
