#include "planes/mpi/mpi_plane.hpp"

#include <algorithm>
#include <cstring>
#include <span>

#include "planes/mpi/capabilities.hpp"
#include "planes/mpi/mpi_requests.hpp"
#include "planes/mpi/recursive_doubling.hpp"
#include "util/dtype.hpp"

namespace ddp {

namespace {

/// The next piece of a message with `left` bytes to go: at most one MPI count.
int piece_of(size_t left) { return static_cast<int>(std::min(left, static_cast<size_t>(max_chunk))); }

class MpiPlane final : public HostPlane {
public:
    explicit MpiPlane(MpiDataComm& data) : data_(data) {}

    const char* name() const override { return "mpi"; }
    std::span<const Capability> capabilities() const override { return mpi_capabilities; }
    // overlaps_operations() stays false: Open MPI moves a non-blocking
    // collective on only inside MPI calls, and each MPI_Iallreduce mallocs
    // a temporary buffer of its size, which with two in flight glibc trims
    // from the heap after every call, so each call faults them in anew.
    // One step at a time took 0.44-0.97x the time of two in flight (2-4
    // ranks, shared memory and TCP; bench/results/cpu-2026-11-29b).

    std::unique_ptr<Pending> start_allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override {
        MPI_Datatype type = mpi_type(dtype);
        MPI_Op mpi_op = data_.ops->get(dtype, op);
        const auto bytes = count * static_cast<int64_t>(element_size(dtype));
        if (bytes <= recursive_doubling_max_bytes) {  // latency-bound: point to point
            const std::span<std::byte> target(static_cast<std::byte*>(data), static_cast<size_t>(bytes));
            return std::make_unique<RecursiveDoubling>(
                data_.comm, data_.rank, data_.size, data_.next_tag(), std::span<const uint64_t>(), target,
                MessageData{static_cast<int>(count), type, mpi_op}, target.size(),
                [target](std::span<const uint64_t>, std::span<const std::byte> result) {
                    std::copy(result.begin(), result.end(), target.begin());
                });
        }
        return in_chunks(data, count, element_size(dtype), [&](void* piece, int n, MPI_Request* request) {
            check(MPI_Iallreduce(MPI_IN_PLACE, piece, n, type, mpi_op, data_.comm, request), "MPI_Iallreduce");
        });
    }

    std::unique_ptr<Pending> start_reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) override {
        MPI_Datatype type = mpi_type(dtype);
        MPI_Op mpi_op = data_.ops->get(dtype, op);
        return in_chunks(data, count, element_size(dtype), [&](void* piece, int n, MPI_Request* request) {
            if (data_.rank == root)
                check(MPI_Ireduce(MPI_IN_PLACE, piece, n, type, mpi_op, root, data_.comm, request), "MPI_Ireduce");
            else
                check(MPI_Ireduce(piece, nullptr, n, type, mpi_op, root, data_.comm, request), "MPI_Ireduce");
        });
    }

    std::unique_ptr<Pending> start_broadcast(void* data, int64_t bytes, int root) override {
        return in_chunks(data, bytes, 1, [&](void* piece, int n, MPI_Request* request) {
            check(MPI_Ibcast(piece, n, MPI_BYTE, root, data_.comm, request), "MPI_Ibcast");
        });
    }

    std::unique_ptr<Pending> start_allgather(const void* send, void* recv, int64_t count, ddp_dtype dtype) override {
        MPI_Datatype type = mpi_type(dtype);
        const auto element = static_cast<int64_t>(element_size(dtype));
        auto* out = static_cast<char*>(recv);
        const bool in_place = send == out + data_.rank * count * element;
        auto requests = std::make_unique<Requests>();
        // Longer than an MPI count: in pieces, each rank's piece landing in
        // its block through a receive type stretched to the block's length.
        for (int64_t done = 0; done < count;) {
            const int64_t piece = std::min(count - done, max_chunk);
            const void* from = in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + done * element;
            if (piece == count) {
                check(MPI_Iallgather(from, static_cast<int>(piece), type, out, static_cast<int>(piece), type, data_.comm,
                                     requests->add()),
                      "MPI_Iallgather");
            } else {
                MPI_Datatype block = MPI_DATATYPE_NULL, stretched = MPI_DATATYPE_NULL;
                check(MPI_Type_contiguous(static_cast<int>(piece), type, &block), "MPI_Type_contiguous");
                check(MPI_Type_create_resized(block, 0, count * element, &stretched), "MPI_Type_create_resized");
                check(MPI_Type_commit(&stretched), "MPI_Type_commit");
                const int started = MPI_Iallgather(from, static_cast<int>(piece), type, out + done * element, 1,
                                                   stretched, data_.comm, requests->add());
                MPI_Type_free(&stretched);  // MPI keeps it while the operation runs
                MPI_Type_free(&block);
                check(started, "MPI_Iallgather");
            }
            done += piece;
        }
        return requests;
    }

    std::unique_ptr<Pending> start_reduce_scatter(const void* send, void* recv, int64_t count, ddp_dtype dtype,
                                                  ddp_op op) override {
        // The C boundary keeps a shard within one MPI count (core/collectives/takes.hpp).
        auto requests = std::make_unique<Requests>();
        check(MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), mpi_type(dtype), data_.ops->get(dtype, op),
                                        data_.comm, requests->add()),
              "MPI_Ireduce_scatter_block");
        return requests;
    }

    // Receives first, then sends, all under one tag: MPI keeps the messages
    // between two ranks under one tag in order, which is the exchange's
    // k-th-meets-k-th rule. Longer than an MPI count, in pieces cut alike on
    // both sides; empty ones, skipped alike. What a rank sends itself it
    // copies (a memcpy is quicker than MPI's way to itself).
    std::unique_ptr<Pending> start_exchange(Exchange exchange) override {
        const Exchange* only = &exchange;
        for (const Meeting& meeting : meetings_of(std::span(&only, 1), data_.rank, 0))
            std::memcpy(meeting.receive->data, meeting.send->data, meeting.receive->bytes);
        auto requests = std::make_unique<Requests>();
        const int tag = data_.next_tag();
        for (const Receive& receive : exchange.receives)
            for (size_t done = 0; done < receive.bytes && receive.peer != data_.rank;
                 done += static_cast<size_t>(max_chunk))
                check(MPI_Irecv(receive.data + done, piece_of(receive.bytes - done), MPI_BYTE, receive.peer, tag,
                                data_.comm, requests->add()),
                      "MPI_Irecv");
        for (const Send& send : exchange.sends)
            for (size_t done = 0; done < send.bytes && send.peer != data_.rank; done += static_cast<size_t>(max_chunk))
                check(MPI_Isend(send.data + done, piece_of(send.bytes - done), MPI_BYTE, send.peer, tag, data_.comm,
                                requests->add()),
                      "MPI_Isend");
        return requests;
    }

private:
    MpiDataComm& data_;
};

}  // namespace

std::unique_ptr<HostPlane> make_mpi_plane(MpiDataComm& data) { return std::make_unique<MpiPlane>(data); }

}  // namespace ddp
