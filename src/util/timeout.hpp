// The one rule every timeout libddp takes follows, from C and from every
// binding (which leave the value to it): a finite number of seconds >= 0,
// where 0 means the default.
#pragma once

namespace ddp {

/// DDP_ERR_INVALID_ARGUMENT naming `name` and the value unless `seconds` is
/// a finite number >= 0; `zero_means` says what 0 stands for there.
void check_timeout(double seconds, const char* name, const char* zero_means);

}  // namespace ddp
