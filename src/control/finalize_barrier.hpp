// The wait for every rank at the end of a communicator's life (ddp_finalize,
// ddp_comm_free): only once every rank has arrived may MPI or a
// communicator be released without risking a hang. Peers announce their
// finalize (an abort notice of reason `finalizing`), so, unlike a failed
// ddp_init's wait (control/startup.cpp), notices do not end it.
#pragma once

#include "control/channel.hpp"
#include "control/control_plane.hpp"

namespace ddp {

/// Whether every rank reaches the finalize barrier: waits up to
/// `timeout_s`; after a timeout broke `control`, a peer that no longer
/// answers (where peers answer in the background) counts as gone at once,
/// and peers that still answer get at least 30 s to notice and arrive.
bool all_reach_finalize(ControlChannel& channel, ControlPlane& control, double timeout_s);

}  // namespace ddp
