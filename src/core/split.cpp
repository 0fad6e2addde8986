#include "core/split.hpp"

#include <string>
#include <utility>
#include <vector>

#include "control/agreement.hpp"
#include "control/control_plane.hpp"

namespace ddp {

namespace {

/// "sub-communicator color 1 (comm_split #3 of world)": the same on every
/// rank of the sub-communicator, since the parent numbers its calls alike.
std::string sub_name(const Communicator& parent, const SplitRequest& request, CallLabel label) {
    const std::string of = call_name(static_cast<uint64_t>(request.kind), label) + " of " +
                           (parent.name().empty() ? std::string("world") : parent.name());
    if (request.kind == CollectiveKind::comm_split_node) return "node communicator (" + of + ")";
    return "sub-communicator color " + std::to_string(request.color) + " (" + of + ")";
}

}  // namespace

std::unique_ptr<Communicator> split_communicator(Communicator& parent, const SplitRequest& request) {
    ControlChannel& channel = parent.channel();
    ControlPlane& control = parent.control();
    CallContext context = control.begin(request.kind, 0);
    CallScope scope(control);
    // Color and key differ between ranks by design: only the call is agreed on.
    parent.agreement().agree(context, encode(CallDescription{request.kind, DDP_OP_SUM, 0, 0, 0, {}}));
    const bool by_node = request.kind == CollectiveKind::comm_split_node;
    const int color = by_node ? channel.node_leader() : request.color;
    const int key = by_node ? channel.rank() : request.key;
    // Every rank's color and key, for transports that make the new groups
    // themselves (a local group's); held to the call's deadline as any wait.
    const uint64_t mine[2] = {static_cast<uint64_t>(static_cast<int64_t>(color)),
                              static_cast<uint64_t>(static_cast<int64_t>(key))};
    std::vector<std::vector<uint64_t>> by_rank;
    control.wait(context, channel.start_allgather_u64(mine, by_rank), WaitStyle::for_peers);
    std::vector<std::pair<int, int>> every_rank;
    for (const auto& words : by_rank)
        every_rank.emplace_back(static_cast<int>(static_cast<int64_t>(words.at(0))),
                                static_cast<int>(static_cast<int64_t>(words.at(1))));
    std::unique_ptr<Transport> sub = parent.transport().split(color, key, every_rank, context.deadline);
    std::unique_ptr<DevicePlane> sub_device;
    if (DevicePlane* device = parent.planes().device())
        sub_device = device->split(color, key, sub ? &sub->channel() : nullptr, context.deadline);
    if (!sub) return nullptr;
    Settings settings = parent.settings();
    if (request.timeout_s > 0) settings.timeout_s = request.timeout_s;
    settings.timeline_path.clear();  // DDP_TIMELINE starts the world's timeline only
    return std::make_unique<Communicator>(std::move(sub), std::move(sub_device), settings, parent.gpu(),
                                          sub_name(parent, request, context.label));
}

}  // namespace ddp
