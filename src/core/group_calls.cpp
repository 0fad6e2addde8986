#include "core/group_calls.hpp"

#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace ddp {

namespace {

struct GroupCalls {
    int depth = 0;
    std::vector<Request> started;
};

thread_local GroupCalls group;

}  // namespace

bool in_group() { return group.depth > 0; }

void group_start() { ++group.depth; }

void group_add(Request request) { group.started.push_back(std::move(request)); }

void group_end() {
    if (group.depth == 0)
        fail(DDP_ERR_INVALID_ARGUMENT, "ddp_group_end without an open group (call ddp_group_start first)");
    if (--group.depth > 0) return;
    // Every one, even after a failure: none may still run when this returns.
    std::vector<Request> started = std::move(group.started);
    group.started.clear();
    std::optional<Error> first;
    for (size_t i = 0; i < started.size(); ++i) {
        std::string message;
        const ddp_status status = started[i].state->wait(message);
        if (status != DDP_OK && !first)
            first = Error(status, "collective " + std::to_string(i + 1) + " of the group: " + message);
    }
    if (first) throw *first;
}

}  // namespace ddp
