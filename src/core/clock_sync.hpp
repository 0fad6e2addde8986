// Measures each rank's clock offset from rank 0's when a timeline starts, so
// that scripts/ddp-trace merge can put every rank's events on one time axis.
#pragma once

#include "control/control_plane.hpp"
#include "trace/timeline.hpp"

namespace ddp {

/// Collective: a few barriers, each rank reading its clock as it leaves
/// each one, then one exchange of the readings. The offset is the median
/// of this rank's reading minus rank 0's (ranks leave a barrier within
/// about one message latency of each other: that is the precision).
trace::ClockSync measure_clock_offset(ControlChannel& channel, ControlPlane& control, CallContext& context);

}  // namespace ddp
