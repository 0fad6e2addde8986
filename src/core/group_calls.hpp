// ddp_group_start / ddp_group_end (NCCL's ncclGroupStart/End): between them
// a thread's collectives return at once and run on their communicators'
// background threads, so that one thread can drive every rank of a group
// from ddp_init_local (a collective completes only once every rank has
// called it: called one after the other, blocking, the first would wait
// for ever). ddp_group_end waits for them all. The state is the calling
// thread's own, as NCCL's is.
#pragma once

#include "core/request.hpp"

namespace ddp {

/// Whether this thread is inside ddp_group_start ... ddp_group_end.
bool in_group();
/// ddp_group_start: opens a group (they nest; the outermost end runs them).
void group_start();
/// A collective started inside this thread's group; ddp_group_end waits for it.
void group_add(Request request);

/// ddp_group_end: closes a group; at the outermost, waits for every
/// collective started in it and throws the first one's error, if any.
/// DDP_ERR_INVALID_ARGUMENT when no group is open.
void group_end();

}  // namespace ddp
