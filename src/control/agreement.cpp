#include "control/agreement.hpp"

#include <algorithm>
#include <cstring>

#include "util/dtype.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"

namespace ddp {

namespace {

// Description layout: header words, then (dtype | device type << 32, count) per tensor.
// An invalid call's description has no tensors: the rank's reason follows
// the header (append_reason).
enum Word : size_t { kind_word, valid_word, op_word, root_word, fusion_word, scalars_word, count_word, header_words };

std::string tensor_text(std::span<const uint64_t> words, size_t index) {
    const uint64_t type = words[header_words + 2 * index];
    return dtype_name(static_cast<int>(type & 0xffffffffu)) + "[" +
           std::to_string(words[header_words + 2 * index + 1]) + "] on " +
           device_type_name(static_cast<int>(type >> 32));
}

// One sentence naming ranks a and b and what differs first between them;
// `names` (this rank's, where the caller gave them) name the tensors as
// the program does.
std::string explain(std::span<const uint64_t> a, int rank_a, std::span<const uint64_t> b, int rank_b,
                    std::span<const char* const> names = {}) {
    const std::string ra = "rank " + std::to_string(rank_a), rb = "rank " + std::to_string(rank_b);
    if (a[kind_word] != b[kind_word])
        return ra + " called " + kind_name(a[kind_word]) + " but " + rb + " called " + kind_name(b[kind_word]);
    const std::string what = kind_name(a[kind_word]);
    if (!a[valid_word] || !b[valid_word]) {
        const bool a_is_bad = !a[valid_word];
        const std::string reason = reason_at(a_is_bad ? a : b, header_words);
        return (a_is_bad ? ra : rb) + " passed invalid arguments to " + what + " (unlike " + (a_is_bad ? rb : ra) +
               ")" + (reason.empty() ? std::string() : ": " + reason);
    }
    const std::string prefix = what + " mismatch: ";
    if (a[op_word] != b[op_word])
        return prefix + ra + " passed op " + op_name(static_cast<int>(a[op_word])) + " but " + rb + " passed op " +
               op_name(static_cast<int>(b[op_word]));
    if (a[root_word] != b[root_word])
        return prefix + ra + " passed root " + std::to_string(a[root_word]) + " but " + rb + " passed root " +
               std::to_string(b[root_word]);
    if (a[fusion_word] != b[fusion_word]) {
        auto fusion = [](uint64_t word) {
            return word == 0 ? std::string("0 (chosen by measurement)") : std::to_string(static_cast<int64_t>(word));
        };
        return prefix + ra + " uses fusion_bytes " + fusion(a[fusion_word]) + " but " + rb + " uses " +
               fusion(b[fusion_word]) + " (set DDP_FUSION_BYTES, DDP_AUTOTUNE and the options alike on every rank)";
    }
    if (a[scalars_word] != b[scalars_word])
        return prefix + ra + " passed " + std::to_string(a[scalars_word]) + " scalars but " + rb + " passed " +
               std::to_string(b[scalars_word]);
    const std::string item =
        a[kind_word] == static_cast<uint64_t>(CollectiveKind::sync_optimizer_state) ? "leaf" : "tensor";
    auto item_name = [&](size_t i) {
        const char* name = i < names.size() ? names[i] : nullptr;
        return item + " " + std::to_string(i) + (name != nullptr ? " (" + std::string(name) + ")" : std::string());
    };
    const size_t common = std::min(a[count_word], b[count_word]);
    for (size_t i = 0; i < common; ++i) {
        if (a[header_words + 2 * i] != b[header_words + 2 * i] ||
            a[header_words + 2 * i + 1] != b[header_words + 2 * i + 1])
            return prefix + item_name(i) + " is " + tensor_text(a, i) + " on " + ra + " but " + tensor_text(b, i) +
                   " on " + rb;
    }
    return prefix + ra + " passed " + std::to_string(a[count_word]) + " " + item + "s but " + rb + " passed " +
           std::to_string(b[count_word]) + " (" + item_name(common) + " is the first present on one rank only)";
}

// What the flight recorder keeps of a call's words.
trace::CallSummary summary_of(std::span<const uint64_t> words, uint64_t hash) {
    trace::CallSummary summary;
    summary.valid = words[valid_word] != 0;
    summary.hash = hash;
    if (!summary.valid) return summary;
    summary.op = static_cast<int32_t>(words[op_word]);
    summary.root = static_cast<int32_t>(words[root_word]);
    summary.tensors = static_cast<int64_t>(words[count_word]);
    summary.bytes = described_bytes(words);
    return summary;
}

}  // namespace

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
        const ddp_tensor& tensor = call.tensors[i];
        words[header_words + 2 * i] = static_cast<uint64_t>(static_cast<uint32_t>(tensor.dtype)) |
                                      static_cast<uint64_t>(static_cast<uint32_t>(tensor.device_type)) << 32;
        words[header_words + 2 * i + 1] = static_cast<uint64_t>(tensor.count);
    }
    return words;
}

int64_t described_bytes(std::span<const uint64_t> words) {
    int64_t bytes = 0;
    for (size_t i = 0; i < words[count_word]; ++i)
        bytes += static_cast<int64_t>(words[header_words + 2 * i + 1]) *
                 static_cast<int64_t>(element_size(static_cast<ddp_dtype>(words[header_words + 2 * i] & 0xffffffffu)));
    return bytes;
}

void Agreement::agree(CallContext& context, std::span<const uint64_t> words, const CarriedAllreduce* carried,
                      uint64_t* vote, std::span<const char* const> names) {
    const uint64_t hash = hash_words(words);
    trace_.recorder.described(context.sequence, summary_of(words, hash));
    {
        trace::Span span(trace_.timeline, carried ? "agreement + small allreduce" : "agreement",
                         trace::Row::work, context.sequence);
        if (span.on()) {
            span.event().plane = route_->name();  // the route its messages took
            if (carried) span.event().bytes = carried->count * static_cast<int64_t>(element_size(carried->dtype));
        }
        if (!hashes_agree(context, hash, carried, vote))
            throw mismatch(context, words,
                           [names](std::span<const uint64_t> a, int rank_a, std::span<const uint64_t> b, int rank_b) {
                               return explain(a, rank_a, b, rank_b, names);
                           });
    }
    trace_.recorder.agreed(context.sequence);
}

void Agreement::agree_on_words(CallContext& context, std::span<const uint64_t> words,
                               const ExplainDifference& explain_difference) {
    trace::Span span(trace_.timeline, "agreement", trace::Row::work, context.sequence);
    if (span.on()) span.event().plane = route_->name();
    if (!hashes_agree(context, hash_words(words))) throw mismatch(context, words, explain_difference);
}

// The fourth word of every round is a measured call's duration
// (control/carried_duration.hpp), kept once agreed for whoever measured it.
// Every round has the four words, so that ranks in different calls still
// read each other's.
bool Agreement::hashes_agree(CallContext& context, uint64_t hash, const CarriedAllreduce* carried, uint64_t* vote) {
    const uint64_t duration = carried_duration_.take_outgoing();
    // max(hash), ~min(hash), max(vote), max(previous call's duration)
    uint64_t extremes[4] = {hash, ~hash, vote != nullptr ? *vote : 0, duration};
    control_.wait(context,
                  carried ? route_->start_max_u64_carrying(extremes, carried->data, carried->count, carried->dtype,
                                                           carried->op)
                          : route_->start_max_u64_carrying(extremes, nullptr, 0, DDP_DTYPE_U8, DDP_OP_MAX),
                  WaitStyle::for_peers);
    context.joined_by_all = true;
    if (vote != nullptr) *vote = extremes[2];
    carried_duration_.agreed(extremes[3]);
    return extremes[0] == ~extremes[1];
}

Error Agreement::mismatch(CallContext& context, std::span<const uint64_t> words,
                          const ExplainDifference& explain_difference) {
    std::vector<std::vector<uint64_t>> all;
    control_.wait(context, channel_.start_allgather_u64(words, all), WaitStyle::for_peers);
    for (size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0]) {
            Error error(DDP_ERR_MISMATCH, explain_difference(all[0], 0, all[r], static_cast<int>(r)));
            control_.record_mismatch(context);
            return error;
        }
    return Error(DDP_ERR_INTERNAL, "ranks' hashes differed but their descriptions are equal");
}

void append_reason(std::vector<uint64_t>& words, std::string_view reason) {
    reason = reason.substr(0, max_reason_bytes);
    const size_t at = words.size() + 1;
    words.push_back(reason.size());
    words.resize(at + (reason.size() + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
    std::memcpy(words.data() + at, reason.data(), reason.size());
}

std::string reason_at(std::span<const uint64_t> words, size_t at) {
    if (at >= words.size()) return {};
    const size_t length = words[at];
    if ((words.size() - at - 1) * sizeof(uint64_t) < length) return {};
    std::string reason(length, '\0');
    std::memcpy(reason.data(), words.data() + at + 1, length);
    return reason;
}

void Agreement::agree_on_invalid_call(CallContext& context, std::string_view reason) {
    std::vector<uint64_t> words(header_words, 0);
    words[kind_word] = static_cast<uint64_t>(context.kind);
    words[valid_word] = 0;
    append_reason(words, reason);
    trace_.recorder.described(context.sequence, summary_of(words, hash_words(words)));
    try {
        if (!hashes_agree(context, hash_words(words)))
            mismatch(context, words, [](auto a, int rank_a, auto b, int rank_b) { return explain(a, rank_a, b, rank_b); });
    } catch (const Error&) {
        // This rank reports its own validation error, not the mismatch or a timeout.
    }
}

}  // namespace ddp
