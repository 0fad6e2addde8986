#include "util/collective_kind.hpp"

#include "util/error.hpp"

namespace ddp {

namespace {

// Every kind, once: its name and whether a binding may report it invalid.
struct KindFacts {
    CollectiveKind kind;
    const char* name;
    bool reportable;
};
constexpr KindFacts kinds[] = {
    {CollectiveKind::allreduce, "allreduce", true},
    {CollectiveKind::broadcast, "broadcast", true},
    {CollectiveKind::reduce, "reduce", true},
    {CollectiveKind::sync_optimizer_state, "sync_optimizer_state", true},
    {CollectiveKind::check_replicas, "check_replicas", true},
    {CollectiveKind::barrier, "barrier", true},
    {CollectiveKind::reducer_create, "reducer_create", true},
    {CollectiveKind::reducer_step, "reducer step", false},
    {CollectiveKind::timeline_start, "timeline_start", false},
    {CollectiveKind::allgather, "allgather", true},
    {CollectiveKind::reduce_scatter, "reduce_scatter", true},
    {CollectiveKind::comm_split, "comm_split", true},
    {CollectiveKind::comm_split_node, "comm_split_node", true},
    {CollectiveKind::alltoall, "alltoall", true},
};

}  // namespace

const char* kind_name(uint64_t kind) {
    for (const KindFacts& facts : kinds)
        if (static_cast<uint64_t>(facts.kind) == kind) return facts.name;
    return "an unknown collective";
}

CollectiveKind reportable_kind(std::string_view name) {
    std::string names;
    for (const KindFacts& facts : kinds) {
        if (!facts.reportable) continue;
        if (name == facts.name) return facts.kind;
        names += std::string(names.empty() ? "" : ", ") + facts.name;
    }
    fail(DDP_ERR_INVALID_ARGUMENT, "collective \"" + std::string(name) + "\" is not one of " + names);
}

std::string call_name(uint64_t kind, CallLabel label) {
    if (!label.for_binding) return std::string(kind_name(kind)) + " #" + std::to_string(label.number);
    return std::string("the binding's own ") + kind_name(kind) +
           (label.number == 0 ? std::string(" before call #1") : " after call #" + std::to_string(label.number));
}

}  // namespace ddp
