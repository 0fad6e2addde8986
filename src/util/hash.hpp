// A fast 64-bit hash of bytes or words, used to compare call descriptions
// and tensor contents across ranks without sending them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ddp {

uint64_t hash_words(std::span<const uint64_t> words);
uint64_t hash_bytes(const void* data, size_t size);

}  // namespace ddp
