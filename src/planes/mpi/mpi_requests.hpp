// MPI requests as a Pending operation, and buffers longer than an MPI count
// started in pieces.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "planes/mpi/mpi_check.hpp"
#include "util/pending.hpp"

namespace ddp {

/// MPI counts are int: longer buffers go in pieces of at most this many elements.
constexpr int64_t max_chunk = INT_MAX / 2;

/// MPI requests that finish together (the pieces of one buffer).
class Requests final : public Pending {
public:
    bool test() override {
        int done = 0;
        check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
        return done != 0;
    }
    MPI_Request* add() { return &requests_.emplace_back(MPI_REQUEST_NULL); }

private:
    std::vector<MPI_Request> requests_;
};

/// Calls `start(piece, count, request)` for each piece of at most max_chunk
/// of the `count` elements at `data`.
template <typename Start>
std::unique_ptr<Pending> in_chunks(void* data, int64_t count, size_t element_bytes, Start start) {
    auto requests = std::make_unique<Requests>();
    auto* bytes = static_cast<char*>(data);
    for (int64_t done = 0; done < count;) {
        const int64_t piece = std::min(count - done, max_chunk);
        start(bytes + done * static_cast<int64_t>(element_bytes), static_cast<int>(piece), requests->add());
        done += piece;
    }
    return requests;
}

}  // namespace ddp
