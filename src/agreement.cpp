#include "agreement.hpp"

#include <algorithm>

#include "dtype.hpp"
#include "error.hpp"
#include "hash.hpp"

namespace ddp {

namespace {

// Description layout: header words, then (dtype, count) for each tensor.
enum Word : size_t { kind_word, valid_word, op_word, root_word, fusion_word, scalars_word,
                     count_word, header_words };

std::vector<uint64_t> encode(const CallDescription& call) {
    std::vector<uint64_t> words(header_words + 2 * call.tensors.size());
    words[kind_word] = static_cast<uint64_t>(call.kind);
    words[valid_word] = 1;
    words[op_word] = static_cast<uint64_t>(call.op);
    words[root_word] = static_cast<uint64_t>(call.root);
    words[fusion_word] = static_cast<uint64_t>(call.fusion_bytes);
    words[scalars_word] = static_cast<uint64_t>(call.n_scalars);
    words[count_word] = call.tensors.size();
    for (size_t i = 0; i < call.tensors.size(); ++i) {
        // dtype and device type in one word: both must match on every rank.
        words[header_words + 2 * i] = static_cast<uint64_t>(static_cast<uint32_t>(call.tensors[i].dtype)) |
                                      static_cast<uint64_t>(static_cast<uint32_t>(call.tensors[i].device_type)) << 32;
        words[header_words + 2 * i + 1] = static_cast<uint64_t>(call.tensors[i].count);
    }
    return words;
}

const char* kind_name(uint64_t kind) {
    switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::allreduce: return "allreduce";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::sync_optimizer_state: return "sync_optimizer_state";
    case CollectiveKind::check_replicas: return "check_replicas";
    case CollectiveKind::barrier: return "barrier";
    }
    return "an unknown collective";
}

std::string tensor_text(std::span<const uint64_t> words, size_t index) {
    const uint64_t kind = words[header_words + 2 * index];
    return dtype_name(static_cast<int>(kind & 0xffffffffu)) + "[" +
           std::to_string(words[header_words + 2 * index + 1]) + "] on " +
           device_type_name(static_cast<int>(kind >> 32));
}

// One sentence naming ranks a and b and what differs first between them.
std::string explain(std::span<const uint64_t> a, int rank_a, std::span<const uint64_t> b, int rank_b) {
    const std::string ra = "rank " + std::to_string(rank_a), rb = "rank " + std::to_string(rank_b);
    if (a[kind_word] != b[kind_word])
        return ra + " called " + kind_name(a[kind_word]) + " but " + rb + " called " +
               kind_name(b[kind_word]);
    const std::string what = kind_name(a[kind_word]);
    if (!a[valid_word] || !b[valid_word]) {
        const bool a_is_bad = !a[valid_word];
        return (a_is_bad ? ra : rb) + " passed invalid arguments to " + what +
               " (it returned DDP_ERR_INVALID_ARGUMENT with the details), unlike " + (a_is_bad ? rb : ra);
    }
    const std::string prefix = what + " mismatch: ";
    if (a[op_word] != b[op_word])
        return prefix + ra + " passed op " + op_name(static_cast<int>(a[op_word])) + " but " + rb +
               " passed op " + op_name(static_cast<int>(b[op_word]));
    if (a[root_word] != b[root_word])
        return prefix + ra + " passed root " + std::to_string(a[root_word]) + " but " + rb +
               " passed root " + std::to_string(b[root_word]);
    if (a[fusion_word] != b[fusion_word])
        return prefix + ra + " uses fusion_bytes " + std::to_string(static_cast<int64_t>(a[fusion_word])) +
               " but " + rb + " uses " + std::to_string(static_cast<int64_t>(b[fusion_word])) +
               " (set DDP_FUSION_BYTES and the options alike on every rank)";
    if (a[scalars_word] != b[scalars_word])
        return prefix + ra + " passed " + std::to_string(a[scalars_word]) + " scalars but " + rb +
               " passed " + std::to_string(b[scalars_word]);
    const std::string item =
        a[kind_word] == static_cast<uint64_t>(CollectiveKind::sync_optimizer_state) ? "leaf" : "tensor";
    const size_t common = std::min(a[count_word], b[count_word]);
    for (size_t i = 0; i < common; ++i) {
        if (a[header_words + 2 * i] != b[header_words + 2 * i] ||
            a[header_words + 2 * i + 1] != b[header_words + 2 * i + 1])
            return prefix + item + " " + std::to_string(i) + " is " + tensor_text(a, i) + " on " + ra +
                   " but " + tensor_text(b, i) + " on " + rb;
    }
    return prefix + ra + " passed " + std::to_string(a[count_word]) + " " + item + "s but " + rb +
           " passed " + std::to_string(b[count_word]) + " (" + item + " " + std::to_string(common) +
           " is the first present on one rank only)";
}

// Exchanges the descriptions and throws the mismatch, naming rank 0 and the
// first rank that differs from it.
[[noreturn]] void report_mismatch(Transport& transport, std::span<const uint64_t> words) {
    const auto all = transport.allgather_u64(words);
    for (size_t r = 1; r < all.size(); ++r) {
        if (all[r] != all[0]) fail(DDP_ERR_MISMATCH, explain(all[0], 0, all[r], static_cast<int>(r)));
    }
    fail(DDP_ERR_INTERNAL, "ranks' call hashes differed but their descriptions are equal");
}

bool hashes_agree(Transport& transport, uint64_t hash, Clock::time_point deadline) {
    uint64_t extremes[2] = {hash, ~hash};  // max(hash) and ~min(hash) in one reduction
    transport.max_u64(extremes, deadline);
    return extremes[0] == ~extremes[1];
}

}  // namespace

uint64_t agree(Transport& transport, const CallDescription& call, Clock::time_point deadline) {
    const std::vector<uint64_t> words = encode(call);
    const uint64_t hash = hash_words(words);
    if (!hashes_agree(transport, hash, deadline)) report_mismatch(transport, words);
    return hash;
}

void agree_on_invalid_call(Transport& transport, CollectiveKind kind, Clock::time_point deadline) {
    std::vector<uint64_t> words(header_words, 0);
    words[kind_word] = static_cast<uint64_t>(kind);
    words[valid_word] = 0;
    if (!hashes_agree(transport, hash_words(words), deadline)) {
        try {
            report_mismatch(transport, words);
        } catch (const Error&) {
            // This rank reports its own validation error, not the mismatch.
        }
    }
}

}  // namespace ddp
