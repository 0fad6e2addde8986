/* Calls into the host's code (the log callback) through a frame of its own
 * without unwind tables (src/meson.build compiles this file so, with no tail
 * call, so that the frame exists). libddp unwinds with a C++ runtime of its
 * own, so a host exception must never unwind into libddp's frames, where that
 * runtime's personality would meet the host's unwinder: the host's unwinder
 * finds no way past this frame, and the host's std::terminate ends the
 * process cleanly instead. ddp.h says callbacks must not throw. */
#include "util/host_callback.h"

void ddp_call_host_log_callback(ddp_log_callback callback, int32_t level, const char* line, void* user) {
    callback(level, line, user);
}
