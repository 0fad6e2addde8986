// The shm plane's view of a fused step's members where they lie: gathering
// and scattering any byte range, across piece boundaries, equals copying
// from and into one packed buffer.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "planes/shm/pieces.hpp"

namespace {

TEST(Pieces, GatherAndScatterAnyRangeAsOnePackedBuffer) {
    const std::vector<size_t> sizes{5, 1, 64, 3, 1000, 7};
    std::vector<std::vector<std::byte>> storage;
    std::vector<ddp::Piece> list;
    std::vector<std::byte> packed;
    for (size_t size : sizes) {
        storage.emplace_back(size);
        for (size_t i = 0; i < size; ++i) storage.back()[i] = static_cast<std::byte>(packed.size() + i);
        packed.insert(packed.end(), storage.back().begin(), storage.back().end());
    }
    for (auto& piece : storage) list.push_back({piece.data(), piece.size()});
    const ddp::shm::Pieces pieces(list);
    const auto copy = [](std::byte* to, const std::byte* from, size_t n) { std::memcpy(to, from, n); };
    for (size_t first : {size_t{0}, size_t{4}, size_t{5}, size_t{6}, size_t{69}, size_t{70}, size_t{1072}})
        for (size_t bytes : {size_t{1}, size_t{2}, size_t{65}, packed.size() - first}) {
            if (first + bytes > packed.size()) continue;
            std::vector<std::byte> out(bytes);
            pieces.gather(out.data(), first, bytes, copy);
            ASSERT_EQ(0, std::memcmp(out.data(), packed.data() + first, bytes)) << first << "+" << bytes;
            // Scatter a marked range back and see it land where packing would put it.
            std::vector<std::byte> marked(bytes, std::byte{0xab});
            pieces.scatter(first, marked.data(), bytes);
            std::vector<std::byte> whole(packed.size());
            pieces.gather(whole.data(), 0, whole.size(), copy);
            for (size_t i = 0; i < whole.size(); ++i)
                ASSERT_EQ(whole[i], i >= first && i < first + bytes ? std::byte{0xab} : packed[i]) << i;
            pieces.scatter(0, packed.data(), packed.size());  // restore
        }
}

// An exchange's stream to one rank: empty pieces add nothing, a range
// past the end is clipped (a slot's last piece of a shorter stream), and
// one stream copies into another straight across.
TEST(Pieces, StreamsClipAtTheirEndAndCopyIntoEachOther) {
    std::vector<std::byte> a(5, std::byte{1}), b(3, std::byte{2}), x(4), y(4);
    ddp::shm::Pieces from, to;
    from.add({a.data(), 5});
    from.add({b.data(), 0});
    from.add({b.data(), 3});
    to.add({x.data(), 4});
    to.add({y.data(), 4});
    const auto copy = [](std::byte* dst, const std::byte* src, size_t n) { std::memcpy(dst, src, n); };
    std::vector<std::byte> out(6, std::byte{9});
    from.gather(out.data(), 4, 6, copy);  // 4 bytes left from byte 4
    EXPECT_EQ(out, (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{2}, std::byte{2}, std::byte{9},
                                           std::byte{9}}));
    from.gather(out.data(), 8, 6, copy);  // nothing from the end on
    EXPECT_EQ(out[0], std::byte{1});
    to.copy_from(from, 3, 100);
    EXPECT_EQ(x, (std::vector<std::byte>{std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}}));
    EXPECT_EQ(y, (std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{2}, std::byte{2}}));
}

}  // namespace
