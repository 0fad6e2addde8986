// The collectives libddp runs, numbered for agreement and for the status
// peers exchange when a collective stalls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ddp {

enum class CollectiveKind : uint64_t {
    allreduce = 1,
    broadcast = 2,
    reduce = 3,
    sync_optimizer_state = 4,
    check_replicas = 5,
    barrier = 6,
    reducer_create = 7,  ///< ddp_reducer_create
    reducer_step = 8,    ///< one step of a reducer, from its first mark to its wait
    timeline_start = 9,  ///< ddp_timeline_start (and DDP_TIMELINE in ddp_init)
    allgather = 10,
    reduce_scatter = 11,
    comm_split = 12,      ///< ddp_comm_split
    comm_split_node = 13, ///< ddp_comm_split_node
    alltoall = 14,
};

/// What is known of every kind, once, next to its number: a new kind is
/// one value above and one row here.
struct KindFacts {
    CollectiveKind kind;
    const char* name;
    bool reportable;  ///< a binding may report a call of it invalid (ddp_report_invalid_call)
};
inline constexpr KindFacts kind_facts[] = {
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

/// "allreduce", ...; "an unknown collective" for other values.
const char* kind_name(uint64_t kind);

/// The collective a binding names in ddp_report_invalid_call: any the
/// user calls (not a reducer's step or timeline_start, which run inside
/// other calls). DDP_ERR_INVALID_ARGUMENT listing them for another name.
CollectiveKind reportable_kind(std::string_view name);

/// How messages name a call. The user's calls are numbered 1, 2, 3, ... in
/// the order made; a call a language binding makes for its own purposes
/// (ddp_collective_options.for_binding) is left out of that count and named
/// after the user's call it follows, so that the user's 50th call is #50.
struct CallLabel {
    uint64_t number = 0;       ///< the user's call number (for a binding's call: the one before it)
    bool for_binding = false;

    static constexpr uint64_t binding_bit = uint64_t{1} << 63;
    /// As one word in messages between ranks, and back.
    uint64_t word() const { return number | (for_binding ? binding_bit : 0); }
    static CallLabel from_word(uint64_t word) { return {word & ~binding_bit, (word & binding_bit) != 0}; }
};

/// "allreduce #5", or "the binding's own allreduce after call #5".
std::string call_name(uint64_t kind, CallLabel label);

}  // namespace ddp
