#include "core/comm_registry.hpp"

#include <algorithm>
#include <mutex>

#include "util/error.hpp"

namespace ddp {

namespace {

std::mutex registry_mutex;
bool world_live = false;  // guarded by registry_mutex

/// Every handle handed out, kept until the process ends (guarded by registry_mutex).
std::vector<std::unique_ptr<CommHandle>>& handles() {
    static std::vector<std::unique_ptr<CommHandle>> all;
    return all;
}

}  // namespace

CommHandle& add_world(const std::function<std::unique_ptr<Communicator>()>& start) {
    std::lock_guard lock(registry_mutex);
    if (world_live)
        fail(DDP_ERR_ALREADY_INITIALIZED,
             "ddp_init was called while the world from an earlier ddp_init is still live "
             "(call ddp_finalize first, or reuse that communicator)");
    auto handle = std::make_unique<CommHandle>();
    handle->live = start();
    world_live = true;
    handles().push_back(std::move(handle));
    return *handles().back();
}

std::vector<CommHandle*> add_local_group(std::vector<std::unique_ptr<Communicator>> ranks) {
    std::lock_guard lock(registry_mutex);
    std::vector<CommHandle*> added;
    for (auto& rank : ranks) {
        auto handle = std::make_unique<CommHandle>();
        handle->live = std::move(rank);
        handle->in_local_group = true;
        added.push_back(handle.get());
        handles().push_back(std::move(handle));
    }
    return added;
}

CommHandle* add_split(CommHandle& parent, const SplitRequest& request) {
    CommHandle* added = nullptr;
    parent.live->run([&] {
        std::unique_ptr<Communicator> made = split_communicator(*parent.live, request);
        if (!made) return;
        auto sub = std::make_unique<CommHandle>();
        sub->live = std::move(made);
        sub->world = parent.world != nullptr ? parent.world : &parent;
        std::lock_guard lock(registry_mutex);
        sub->world->subs.push_back(sub.get());
        added = sub.get();
        handles().push_back(std::move(sub));
    });
    return added;
}

void finalize_world(CommHandle& world) {
    if (world.in_local_group) {
        // Not under the registry's lock: a rank's finalize first waits for
        // its async requests, which wait for its peers.
        std::lock_guard lock(world.finalizing);
        if (!world.live) return;  // already finalized
        std::vector<CommHandle*> sub_handles;
        {
            std::lock_guard registry(registry_mutex);
            sub_handles = world.subs;
        }
        std::vector<Communicator*> subs;
        for (CommHandle* sub : sub_handles) subs.push_back(sub->live.get());
        // Refused (nothing released) while another thread is inside a call on it or on a sub.
        world.live->finalize(subs);
        std::vector<std::unique_ptr<Communicator>> released;  // destroyed after the lock
        std::lock_guard registry(registry_mutex);
        for (CommHandle* sub : sub_handles) released.push_back(std::move(sub->live));
        std::erase_if(world.subs,
                      [&](CommHandle* sub) { return std::ranges::find(sub_handles, sub) != sub_handles.end(); });
        released.push_back(std::move(world.live));
        return;
    }
    std::lock_guard lock(registry_mutex);
    if (!world.live) return;  // already finalized
    std::vector<Communicator*> subs;
    for (CommHandle* sub : world.subs) subs.push_back(sub->live.get());
    // Refused (nothing released) while another thread is inside a call on it or on a sub.
    world.live->finalize(subs);
    for (CommHandle* sub : world.subs) std::unique_ptr<Communicator> released = std::move(sub->live);
    world.subs.clear();
    std::unique_ptr<Communicator> communicator = std::move(world.live);
    world_live = false;
}

void free_sub(CommHandle& sub) {
    // A local group's rank finalizes its subs outside the registry's lock,
    // under its own: a sub is freed before that, or found gone after it.
    std::unique_lock<std::mutex> world_finalizing;
    if (sub.world->in_local_group) world_finalizing = std::unique_lock(sub.world->finalizing);
    if (!sub.live) return;  // already freed (or finalized with its world)
    sub.live->finalize();   // refused (nothing released) while another thread is inside a call on it
    std::lock_guard lock(registry_mutex);
    std::erase(sub.world->subs, &sub);
    std::unique_ptr<Communicator> released = std::move(sub.live);
}

}  // namespace ddp
