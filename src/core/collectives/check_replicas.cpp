// check_replicas: whether every rank holds the same bytes in each tensor,
// and if not, which tensor and which two ranks differ. Hashes on the host,
// compared over the control channel.
#include "core/collectives/collective_rules.hpp"
#include "trace/timeline.hpp"
#include "util/dtype.hpp"
#include "util/hash.hpp"

namespace ddp {

namespace {

// (max hash, ~min hash) per tensor is equal on every rank iff max == min.
void compare_replicas(Communicator& comm, CallContext& context, const CollectiveCall& call, const FusionPlan&) {
    ControlChannel& channel = comm.channel();
    const auto tensors = call.tensors;
    std::vector<uint64_t> extremes(2 * tensors.size()), hashes(tensors.size());
    const trace::Span span(comm.trace().timeline, "hash", trace::Row::work, context.sequence);
    for (size_t i = 0; i < tensors.size(); ++i) {
        hashes[i] = hash_bytes(tensors[i].data, byte_size(tensors[i]));
        extremes[2 * i] = hashes[i];
        extremes[2 * i + 1] = ~hashes[i];
    }
    comm.control().wait(context, channel.start_max_u64(extremes), WaitStyle::for_data);
    *call.identical = true;
    for (size_t i = 0; i < tensors.size(); ++i) {
        if (extremes[2 * i] == ~extremes[2 * i + 1]) continue;
        std::vector<std::vector<uint64_t>> all;
        comm.control().wait(context, channel.start_allgather_u64(std::span(&hashes[i], 1), all), WaitStyle::for_data);
        size_t other = 1;
        while (other < all.size() && all[other][0] == all[0][0]) ++other;
        *call.identical = false;
        *call.difference = "check_replicas: tensor " + std::to_string(i) + " (" + dtype_name(tensors[i].dtype) + "[" +
                           std::to_string(tensors[i].count) + "]) differs between rank 0 and rank " +
                           std::to_string(other);
        return;
    }
}

Crossing reads_only(const CollectiveCall&, int) { return {true, false}; }

}  // namespace

extern const CollectiveRules check_replicas_rules{
    .takes = {.writes_list = false},
    .host = compare_replicas,
    .planned = false,
    .crossing = reads_only,
};

}  // namespace ddp
