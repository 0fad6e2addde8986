/* The calls into the host's code, in C without unwind tables (see
 * host_callback.c). */
#ifndef DDP_UTIL_HOST_CALLBACK_H
#define DDP_UTIL_HOST_CALLBACK_H

#include "ddp/ddp.h"

#ifdef __cplusplus
extern "C" {
#endif

void ddp_call_host_log_callback(ddp_log_callback callback, int32_t level, const char* line, void* user);

#ifdef __cplusplus
}
#endif

#endif
