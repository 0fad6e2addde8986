// Before a collective moves data, the ranks agree that they are making the
// same call: same kind, op, root, fusion size and tensor list (each
// tensor's dtype, count and device type). Each rank hashes its call's
// description; one 16-byte MAX-allreduce of (hash, ~hash) tells every rank
// whether all hashes were equal (a small allreduce may ride along). Only when they were not do the ranks
// exchange the descriptions, to name the ranks and the first differing
// tensor in the same message on every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <span>
#include <vector>

#include "control/agreement_route.hpp"
#include "control/carried_duration.hpp"
#include "control/control_plane.hpp"
#include "util/collective_kind.hpp"
#include "util/error.hpp"
#include "ddp/ddp.h"

namespace ddp {

/// What a rank passed to a collective; every field takes part in agreement.
struct CallDescription {
    CollectiveKind kind;
    ddp_op op = DDP_OP_SUM;
    int32_t root = 0;
    int64_t fusion_bytes = 0;
    int64_t n_scalars = 0;
    std::span<const ddp_tensor> tensors;
};

/// The description as words: equal words mean an equal call.
std::vector<uint64_t> encode(const CallDescription& call);

/// The bytes of the tensors that `words` (from encode) describe.
int64_t described_bytes(std::span<const uint64_t> words);

/// A small allreduce (at most the agreement route's carried_capacity()) that travels in
/// agreement's own messages: in place on `data`, which holds the result
/// once agree() returns.
struct CarriedAllreduce {
    void* data = nullptr;
    int64_t count = 0;
    ddp_dtype dtype = DDP_DTYPE_U8;
    ddp_op op = DDP_OP_SUM;  ///< as a plane takes it (no AVG)
};

/// One sentence saying how rank a's words differ from rank b's.
using ExplainDifference =
    std::function<std::string(std::span<const uint64_t> a, int rank_a, std::span<const uint64_t> b, int rank_b)>;

/// A communicator's agreement: the route its rounds take (the channel, or a
/// plane's faster one between the same ranks) and the word every round
/// carries from one call to the next (a measured call's duration, for the
/// bucket tuner). Its waits are held to the call's deadline by `control`.
class Agreement {
public:
    /// `trace`: the communicator's, where each call's description goes.
    Agreement(ControlChannel& channel, ControlPlane& control, trace::CallTrace& trace)
        : channel_(channel), control_(control), trace_(trace) {}
    Agreement(const Agreement&) = delete;
    Agreement& operator=(const Agreement&) = delete;

    /// Where the rounds travel: the channel unless a faster route is set
    /// (once, before the first collective; it must outlive this).
    AgreementRoute& route() { return *route_; }
    void route_through(AgreementRoute& route) { route_ = &route; }
    /// A measured call's duration, carried in the next round.
    CarriedDuration& carried_duration() { return carried_duration_; }

    /// Agrees on the encoded call `words` (from encode), carrying `carried`
    /// when given. `vote`, when given, is this rank's word on a fact that may
    /// differ between ranks without making the calls differ (whether its
    /// tensors lie in one region of memory): it comes back as the largest word
    /// any rank passed, in the same message. Throws DDP_ERR_MISMATCH when
    /// ranks differ (naming a tensor by its index and, where `names` gives it,
    /// by the program's name for it), DDP_ERR_TIMEOUT past the deadline.
    void agree(CallContext& context, std::span<const uint64_t> words, const CarriedAllreduce* carried = nullptr,
               uint64_t* vote = nullptr, std::span<const char* const> names = {});
    /// Agrees on any words the same way; on a difference every rank throws
    /// DDP_ERR_MISMATCH with `explain` applied to rank 0 and the first rank
    /// that differs from it.
    void agree_on_words(CallContext& context, std::span<const uint64_t> words, const ExplainDifference& explain);
    /// Takes part for a call whose arguments failed validation on this
    /// rank, so that the peers return DDP_ERR_MISMATCH instead of waiting,
    /// naming this rank and `reason` (this rank's own error message). Errors
    /// of that step are dropped: the caller reports its own.
    void agree_on_invalid_call(CallContext& context, std::string_view reason);

private:
    /// Whether every rank's hash equals this rank's (one round).
    bool hashes_agree(CallContext& context, uint64_t hash, const CarriedAllreduce* carried = nullptr,
                      uint64_t* vote = nullptr);
    /// Exchanges the words; the mismatch names rank 0 and the first rank that differs.
    Error mismatch(CallContext& context, std::span<const uint64_t> words, const ExplainDifference& explain);

    ControlChannel& channel_;
    ControlPlane& control_;
    trace::CallTrace& trace_;
    AgreementRoute* route_ = &channel_;
    CarriedDuration carried_duration_;
};

/// The longest reason a rank sends its peers; longer ones are cut.
constexpr size_t max_reason_bytes = 1024;

/// Appends a rank's reason (its first max_reason_bytes) to words that its
/// peers will see: its length, then its bytes, eight to a word.
void append_reason(std::vector<uint64_t>& words, std::string_view reason);

/// The reason append_reason put at words[at] ("" when the words are too short).
std::string reason_at(std::span<const uint64_t> words, size_t at);

}  // namespace ddp
