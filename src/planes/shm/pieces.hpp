// The members of a fused step where they lie in the caller's memory, read
// and written as if they were one buffer: the shm plane gathers them into
// its segment and scatters results back, so the caller packs nothing. An
// exchange's sends to one rank (and receives from one) are such a stream too.
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
    explicit Pieces(std::span<const Piece> pieces) {
        for (const Piece& piece : pieces) add(piece);
    }
    /// One more piece at the end (an empty one adds nothing).
    void add(Piece piece) {
        if (piece.bytes == 0) return;
        starts_.push_back(total_);
        pieces_.push_back(piece);
        total_ += piece.bytes;
    }

    bool empty() const { return pieces_.empty(); }

    /// Bytes [first, first + bytes) of the pieces into `out`, each run by
    /// `copy(dst, src, n)`; bytes past the end are none of theirs.
    template <class Copy>
    void gather(std::byte* out, size_t first, size_t bytes, Copy copy) const {
        for_each_run(first, bytes, [&](std::byte* piece, size_t n) {
            copy(out, piece, n);
            out += n;
        });
    }

    /// `bytes` bytes from `in` into the pieces at byte `first`, as far as they reach.
    void scatter(size_t first, const std::byte* in, size_t bytes) const {
        for_each_run(first, bytes, [&](std::byte* piece, size_t n) {
            std::memcpy(piece, in, n);
            in += n;
        });
    }

    /// Bytes [first, first + bytes) of `from` into the same bytes of these
    /// pieces, as far as both reach: one copy, no buffer in between.
    void copy_from(const Pieces& from, size_t first, size_t bytes) const {
        size_t at = first;
        from.for_each_run(first, std::min(bytes, total_ > first ? total_ - first : 0), [&](std::byte* run, size_t n) {
            scatter(at, run, n);
            at += n;
        });
    }

private:
    /// Calls `run(address, n)` for each stretch of [first, first + bytes) within one piece, in order.
    template <class Run>
    void for_each_run(size_t first, size_t bytes, Run run) const {
        if (first >= total_) return;
        bytes = std::min(bytes, total_ - first);
        auto k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin()) - 1;
        for (size_t within = first - starts_[k]; bytes > 0; ++k, within = 0) {
            const size_t n = std::min(bytes, pieces_[k].bytes - within);
            run(pieces_[k].data + within, n);
            bytes -= n;
        }
    }

    std::vector<Piece> pieces_;  ///< none empty
    std::vector<size_t> starts_;  ///< each piece's first byte in the whole
    size_t total_ = 0;
};

}  // namespace ddp::shm
