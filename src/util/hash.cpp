#include "util/hash.hpp"

#include <cstring>

namespace ddp {

namespace {

constexpr uint64_t multiplier = 0x9E3779B97F4A7C15ull;

uint64_t mix(uint64_t h, uint64_t word) {
    h ^= word * 0xBF58476D1CE4E5B9ull;
    h = (h << 27) | (h >> 37);
    return h * multiplier + 0x94D049BB133111EBull;
}

uint64_t finish(uint64_t h) {
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

}  // namespace

uint64_t hash_words(std::span<const uint64_t> words) {
    uint64_t h = words.size();
    for (uint64_t word : words) h = mix(h, word);
    return finish(h);
}

uint64_t hash_bytes(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    // Four independent lanes keep the multiplier pipeline busy on large tensors.
    uint64_t lanes[4] = {size, size ^ 1, size ^ 2, size ^ 3};
    size_t i = 0;
    for (; i + 32 <= size; i += 32) {
        for (int lane = 0; lane < 4; ++lane) {
            uint64_t word;
            std::memcpy(&word, bytes + i + 8 * lane, 8);
            lanes[lane] = mix(lanes[lane], word);
        }
    }
    uint64_t h = mix(mix(mix(lanes[0], lanes[1]), lanes[2]), lanes[3]);
    for (; i < size; ++i) h = mix(h, bytes[i]);
    return finish(h);
}

}  // namespace ddp
