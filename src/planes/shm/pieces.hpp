// The members of a fused step where they lie in the caller's memory, read
// and written as if they were one buffer: the shm plane gathers them into
// its segment and scatters results back, so the caller packs nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "planes/host_plane.hpp"

namespace ddp::shm {

class Pieces {
public:
    Pieces() = default;
    explicit Pieces(std::span<const Piece> pieces) : pieces_(pieces.begin(), pieces.end()) {
        size_t start = 0;
        for (const Piece& piece : pieces_) {
            starts_.push_back(start);
            start += piece.bytes;
        }
    }

    bool empty() const { return pieces_.empty(); }

    /// Bytes [first, first + bytes) of the pieces into `out`, each run by `copy(dst, src, n)`.
    template <class Copy>
    void gather(std::byte* out, size_t first, size_t bytes, Copy copy) const {
        for_each_run(first, bytes, [&](std::byte* piece, size_t n) {
            copy(out, piece, n);
            out += n;
        });
    }

    /// `bytes` bytes from `in` into the pieces at byte `first`.
    void scatter(size_t first, const std::byte* in, size_t bytes) const {
        for_each_run(first, bytes, [&](std::byte* piece, size_t n) {
            std::memcpy(piece, in, n);
            in += n;
        });
    }

private:
    /// Calls `run(address, n)` for each stretch of [first, first + bytes) within one piece, in order.
    template <class Run>
    void for_each_run(size_t first, size_t bytes, Run run) const {
        auto k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin()) - 1;
        for (size_t within = first - starts_[k]; bytes > 0; ++k, within = 0) {
            const size_t n = std::min(bytes, pieces_[k].bytes - within);
            run(pieces_[k].data + within, n);
            bytes -= n;
        }
    }

    std::vector<Piece> pieces_;  ///< none empty
    std::vector<size_t> starts_;  ///< each piece's first byte in the whole
};

}  // namespace ddp::shm
