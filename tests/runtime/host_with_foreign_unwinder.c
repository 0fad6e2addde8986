/* A host process whose global scope offers another unwinder before
 * libgcc_s, as Julia's does (foreign_unwinder.c, preloaded by meson.build):
 * libddp's error paths throw and catch C++ exceptions inside libddp, and
 * must still return a status and a message here. The call below throws
 * inside libddp (the timeline file cannot be created) and must come back as
 * DDP_ERR_INVALID_ARGUMENT; a library whose throw reached the foreign
 * unwinder aborts instead. */
#define _GNU_SOURCE
#include <ddp/ddp.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    /* The test means nothing unless the foreign unwinder is the one the
     * global scope gives. */
    Dl_info where;
    void* raise = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
    if (raise == NULL || dladdr(raise, &where) == 0 || strstr(where.dli_fname, "foreign_unwinder") == NULL) {
        fprintf(stderr, "the global scope's _Unwind_RaiseException is not the foreign unwinder's: preload it\n");
        return 1;
    }
    ddp_comm* world = NULL;
    if (ddp_init(NULL, &world) != DDP_OK) {
        fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        return 1;
    }
    ddp_status status = ddp_timeline_start(world, "/nonexistent-folder/timeline.json");
    const char* message = ddp_last_error_message();
    int ok = status == DDP_ERR_INVALID_ARGUMENT && strstr(message, "nonexistent-folder") != NULL;
    printf("%s: %s\n", ddp_status_name(status), message);
    if (ddp_finalize(world) != DDP_OK) return 1;
    return ok ? 0 : 1;
}
