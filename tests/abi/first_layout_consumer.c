/* A program built against the first released options layout
 * (ddp_collective_options = {struct_size, fusion_bytes}, from the header
 * that first-layout-header.py generates) runs against this library: _init
 * must write only the bytes the program knows of, and collectives must read
 * only those, giving the newer fields their defaults. Run on the self
 * backend. */
#include "ddp_first_layout.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(condition, ...)                                      \
    do {                                                           \
        if (!(condition)) {                                        \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                          \
            fprintf(stderr, "\n");                                 \
            failures++;                                            \
        }                                                          \
    } while (0)

/* The options followed by bytes that are NaN as a double, where the newer
 * library keeps timeout_s: reading them would fail the call, writing them
 * would change the canary. */
struct options_and_canary {
    ddp_collective_options opts;
    unsigned char canary[64];
};

static int canary_intact(const struct options_and_canary* s) {
    size_t i;
    for (i = 0; i < sizeof s->canary; i++)
        if (s->canary[i] != 0xFF) return 0;
    return 1;
}

static void init_writes_only_the_old_fields(void) {
    struct options_and_canary s;
    ddp_status status;
    memset(&s, 0xFF, sizeof s);
    CHECK(sizeof s.opts == 16, "the first layout is 16 bytes, this header's is %zu", sizeof s.opts);
    status = ddp_collective_options_init(&s.opts, sizeof s.opts);
    CHECK(status == DDP_OK, "%s: %s", ddp_status_name(status), ddp_last_error_message());
    CHECK(canary_intact(&s), "_init wrote past the caller's %zu bytes", sizeof s.opts);
    CHECK(s.opts.struct_size == sizeof s.opts, "struct_size is %u, not %zu", s.opts.struct_size,
          sizeof s.opts);
    CHECK(s.opts.fusion_bytes == 0, "fusion_bytes defaults to %lld, not 0", (long long)s.opts.fusion_bytes);
}

static void allreduce_reads_only_the_old_fields(void) {
    struct options_and_canary s;
    ddp_comm* world = NULL;
    float values[3] = {1.0f, 2.0f, 3.0f};
    ddp_tensor tensor;
    ddp_status status;
    int32_t size = 0;

    memset(&s, 0xFF, sizeof s);
    status = ddp_collective_options_init(&s.opts, sizeof s.opts);
    CHECK(status == DDP_OK, "%s: %s", ddp_status_name(status), ddp_last_error_message());
    s.opts.fusion_bytes = -1;

    status = ddp_init(NULL, &world);
    CHECK(status == DDP_OK, "ddp_init: %s: %s", ddp_status_name(status), ddp_last_error_message());
    if (status != DDP_OK) return;
    ddp_size(world, &size);
    CHECK(size == 1, "run directly, the world has %d ranks, not 1", size);

    memset(&tensor, 0, sizeof tensor);
    tensor.data = values;
    tensor.count = 3;
    tensor.dtype = DDP_DTYPE_F32;
    tensor.device_type = DDP_DEVICE_CPU;
    status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &s.opts);
    CHECK(status == DDP_OK, "allreduce with old options: %s: %s", ddp_status_name(status),
          ddp_last_error_message());
    CHECK(values[0] == 1.0f && values[1] == 2.0f && values[2] == 3.0f,
          "a one-rank sum changed the data: %g %g %g", values[0], values[1], values[2]);
    CHECK(canary_intact(&s), "allreduce wrote past the caller's options");

    status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_AVG, &s.opts);
    CHECK(status == DDP_OK, "avg with old options: %s: %s", ddp_status_name(status),
          ddp_last_error_message());

    s.opts.struct_size = 8;
    status = ddp_allreduce_tensor_list(world, &tensor, 1, DDP_OP_SUM, &s.opts);
    CHECK(status == DDP_ERR_INVALID_ARGUMENT, "opts->struct_size 8 gave %s", ddp_status_name(status));
    CHECK(strstr(ddp_last_error_message(), "struct_size") != NULL, "message: '%s'",
          ddp_last_error_message());

    status = ddp_finalize(world);
    CHECK(status == DDP_OK, "ddp_finalize: %s: %s", ddp_status_name(status), ddp_last_error_message());
}

static void init_rejects_sizes_outside_the_known_layouts(void) {
    /* Room for any size tried, so that a wrong acceptance cannot overrun. */
    union {
        ddp_collective_options opts;
        unsigned char bytes[4096];
    } buffer;
    const uint32_t sizes[] = {0, 4, 15, 25, 32, 4096};
    size_t i;
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ddp_status status = ddp_collective_options_init(&buffer.opts, sizes[i]);
        CHECK(status == DDP_ERR_INVALID_ARGUMENT, "struct_size %u gave %s", sizes[i],
              ddp_status_name(status));
        CHECK(strstr(ddp_last_error_message(), "struct_size") != NULL,
              "struct_size %u: the message does not name struct_size: '%s'", sizes[i],
              ddp_last_error_message());
    }
    CHECK(ddp_collective_options_init(NULL, sizeof buffer.opts) == DDP_ERR_INVALID_ARGUMENT,
          "NULL opts accepted");
}

int main(void) {
    init_writes_only_the_old_fields();
    allreduce_reads_only_the_old_fields();
    init_rejects_sizes_outside_the_known_layouts();
    if (failures == 0) printf("first-layout options: ok\n");
    return failures == 0 ? 0 : 1;
}
