/* Built by tests/pkgconfig against an installed libddp with nothing but
 * `pkg-config --cflags --libs ddp`: it proves the header, ddp.pc and
 * libddp.so.0 work for a plain C99 program. */
#include <ddp/ddp.h>
#include <stdio.h>

int main(void) {
    ddp_comm* world = NULL;
    if (ddp_init(NULL, &world) != DDP_OK) {
        fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        return 1;
    }
    int32_t size = 0;
    float gradient[3] = {1, 2, 3};
    ddp_tensor tensor = {gradient, 3, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    if (ddp_size(world, &size) != DDP_OK ||
        ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_AVG, NULL) != DDP_OK) {
        fprintf(stderr, "%s\n", ddp_last_error_message());
        return 1;
    }
    printf("libddp %s, %d rank(s), averaged gradient %.1f %.1f %.1f\n", ddp_version_string(), size,
           gradient[0], gradient[1], gradient[2]);
    return ddp_finalize(world) == DDP_OK && gradient[2] == 3.0f ? 0 : 1;
}
