// The live communicators behind the C handles: the world from ddp_init and
// the sub-communicators split from it. A handle outlives ddp_finalize and
// ddp_comm_free (until the process ends), so that a stale one is
// recognised (its communicator is gone) instead of dereferencing freed
// memory; the registry keeps every handle, so that they are not leaks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/communicator.hpp"
#include "core/split.hpp"

namespace ddp {

/// What a ddp_comm* points to.
struct CommHandle {
    static constexpr uint64_t expected_magic = 0x6464705f636f6d6dull;  // "ddp_comm"
    uint64_t magic = expected_magic;
    /// The communicator; nullptr once finalized (or freed).
    std::unique_ptr<Communicator> live;
    /// A sub-communicator's world (whatever it was split from); nullptr
    /// for the world itself.
    CommHandle* world = nullptr;
    /// The world's live sub-communicators, oldest first, for ddp_finalize
    /// to release (guarded by the registry's lock).
    std::vector<CommHandle*> subs;
    /// One rank of a group from ddp_init_local (not the process's world).
    bool in_local_group = false;
    /// Held while such a rank finalizes (outside the registry's lock).
    std::mutex finalizing;
    /// At process exit: a communicator the program never finalized is left
    /// alone (tearing it down could wait for peers), not destroyed.
    ~CommHandle() { static_cast<void>(live.release()); }
};

/// Starts the world with `start` and keeps its handle. Holds the registry's
/// lock meanwhile, so that two ddp_init calls cannot both start one.
/// Throws DDP_ERR_ALREADY_INITIALIZED while an earlier world is live.
CommHandle& add_world(const std::function<std::unique_ptr<Communicator>()>& start);

/// Keeps the handles of a group from ddp_init_local, in rank order.
std::vector<CommHandle*> add_local_group(std::vector<std::unique_ptr<Communicator>> ranks);

/// Splits `parent`'s live communicator (in its call order) and keeps the
/// new handle with its world; nullptr for a rank that joins none.
CommHandle* add_split(CommHandle& parent, const SplitRequest& request);

/// Finalizes the world `world` and its live sub-communicators (nothing when
/// already finalized); refused, with nothing released, while another thread
/// is inside a call on any of them.
void finalize_world(CommHandle& world);

/// Frees the sub-communicator `sub` (nothing when already freed, or
/// finalized with its world); refused, with nothing released, while another
/// thread is inside a call on it.
void free_sub(CommHandle& sub);

}  // namespace ddp
