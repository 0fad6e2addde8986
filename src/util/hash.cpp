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

// Four independent lanes keep the multiplier pipeline busy (word i goes to
// lane i % 4): a chain of one lane waits out each multiply.
template <typename Word>
uint64_t in_four_lanes(uint64_t seed, size_t blocks, Word word) {
    uint64_t lanes[4] = {seed, seed ^ 1, seed ^ 2, seed ^ 3};
    for (size_t block = 0; block < blocks; ++block)
        for (size_t lane = 0; lane < 4; ++lane) lanes[lane] = mix(lanes[lane], word(4 * block + lane));
    return mix(mix(mix(lanes[0], lanes[1]), lanes[2]), lanes[3]);
}

}  // namespace

// A call's description (two words per tensor) is hashed on every call.
uint64_t hash_words(std::span<const uint64_t> words) {
    const size_t blocks = words.size() / 4;
    uint64_t h = in_four_lanes(words.size(), blocks, [words](size_t i) { return words[i]; });
    for (size_t i = 4 * blocks; i < words.size(); ++i) h = mix(h, words[i]);
    return finish(h);
}

uint64_t hash_bytes(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    const size_t blocks = size / 32;
    uint64_t h = in_four_lanes(size, blocks, [bytes](size_t i) {
        uint64_t word;
        std::memcpy(&word, bytes + 8 * i, 8);
        return word;
    });
    for (size_t i = 32 * blocks; i < size; ++i) h = mix(h, bytes[i]);
    return finish(h);
}

}  // namespace ddp
