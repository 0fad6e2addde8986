/* A program compiled against the first header (make_old_header.py: no
 * ddp_collective_options.timeout_s or cuda_stream, no ddp_init_options.hang_watchdog_s)
 * runs against this library: _init must not write past the old, smaller structs, and the
 * library must read them. */
#include <stdio.h>
#include <string.h>

#include "ddp_old.h"

#define CHECK(condition)                                                     \
    do {                                                                     \
        if (!(condition)) {                                                  \
            fprintf(stderr, "%s:%d: %s (%s)\n", __FILE__, __LINE__,        \
                    #condition, ddp_last_error_message());                   \
            return 1;                                                        \
        }                                                                    \
    } while (0)

int main(void) {
    struct {
        ddp_collective_options opts;
        unsigned char canary[32];
    } guarded;
    size_t i;
    ddp_comm* world = NULL;
    struct {
        ddp_init_options opts;
        unsigned char canary[32];
    } init;
    float values[3] = {1, 2, 3};
    ddp_tensor tensor = {values, 3, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};

    CHECK(sizeof guarded.opts == 16); /* the old layout, as this program sees it */
    memset(&guarded, 0xAB, sizeof guarded);
    CHECK(ddp_collective_options_init(&guarded.opts, sizeof guarded.opts) == DDP_OK);
    CHECK(guarded.opts.struct_size == sizeof guarded.opts);
    CHECK(guarded.opts.fusion_bytes == 0);
    for (i = 0; i < sizeof guarded.canary; ++i) CHECK(guarded.canary[i] == 0xAB);

    CHECK(sizeof init.opts == 24); /* {struct_size, backend, mpi_comm_fortran, timeout_s} */
    memset(&init, 0xAB, sizeof init);
    CHECK(ddp_init_options_init(&init.opts, sizeof init.opts) == DDP_OK);
    for (i = 0; i < sizeof init.canary; ++i) CHECK(init.canary[i] == 0xAB);
    init.opts.backend = DDP_BACKEND_SELF;
    CHECK(ddp_init(&init.opts, &world) == DDP_OK);
    guarded.opts.fusion_bytes = -1;
    CHECK(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &guarded.opts) == DDP_OK);
    CHECK(values[2] == 3);
    CHECK(ddp_barrier(world, &guarded.opts) == DDP_OK);
    /* A collective refuses an options struct smaller than any layout. */
    guarded.opts.struct_size = 8;
    CHECK(ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &guarded.opts) ==
          DDP_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ddp_last_error_message(), "opts->struct_size is 8") != NULL);
    /* Sizes the library cannot honour are refused, with the reason. */
    CHECK(ddp_collective_options_init(&guarded.opts, 8) == DDP_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ddp_last_error_message(), "struct_size is 8") != NULL);
    CHECK(ddp_collective_options_init(&guarded.opts, 64) == DDP_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ddp_last_error_message(), "newer ddp.h") != NULL);
    CHECK(ddp_collective_options_init(&guarded.opts, 0) == DDP_ERR_INVALID_ARGUMENT);
    CHECK(ddp_collective_options_init(&guarded.opts, 15) == DDP_ERR_INVALID_ARGUMENT);
    CHECK(ddp_collective_options_init(&guarded.opts, 25) == DDP_ERR_INVALID_ARGUMENT); /* between layouts */
    CHECK(ddp_collective_options_init(&guarded.opts, 33) == DDP_ERR_INVALID_ARGUMENT);
    CHECK(ddp_collective_options_init(&guarded.opts, 41) == DDP_ERR_INVALID_ARGUMENT);
    for (i = 0; i < sizeof guarded.canary; ++i) CHECK(guarded.canary[i] == 0xAB);
    CHECK(ddp_finalize(world) == DDP_OK);
    printf("an old-layout consumer works against libddp %s\n", ddp_version_string());
    return 0;
}
