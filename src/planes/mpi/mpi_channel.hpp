// The mpi control channel: status questions and answers, heartbeats, abort
// notices and the finalize barrier on a communicator of their own (a second
// duplicate of the caller's, so that they never meet the data), answered by
// a background thread where MPI allows one; agreement's words travel on the
// data communicator, in order with the data.
#pragma once

#include <mpi.h>

#include <memory>

#include "control/channel.hpp"
#include "planes/mpi/data_comm.hpp"

namespace ddp {

class MpiChannel;

/// A control channel on `control` (which it frees at finalize) beside
/// `data`, which outlives it. `thread_level`: MPI's. Collective: every rank
/// exchanges its process identity.
std::unique_ptr<MpiChannel> make_mpi_channel(MpiDataComm& data, MPI_Comm control, int thread_level);

/// What the transport asks of its channel besides ControlChannel's.
class MpiChannel : public ControlChannel {
public:
    /// Whether an operation a timeout abandoned may still use the data
    /// communicator (then it is not freed: that could wait for the operation).
    virtual bool abandoned_any() = 0;
    /// Stops the responder and, with `peers_present`, cancels the control
    /// receives and frees the control communicator (else leaves MPI as it is).
    virtual void finalize(bool peers_present) = 0;
};

}  // namespace ddp
