/*
 * A scripted run for the timeline and flight recorder tests (check_trace.py
 * starts it under mpirun -np 2 and reads what it leaves behind):
 *
 *   trace_script timeline PATH   the calls of SCRIPT below, recorded to PATH (%r: rank)
 *   trace_script timeout         rank 1 is late for call #4 (run with DDP_TIMEOUT_S=1)
 *   trace_script mismatch        call #3: rank 0 passes 3 tensors, rank 1 passes 2
 *   trace_script abort           after call #2, rank 0 aborts the communicator
 *   trace_script dump PATH       three calls, then ddp_dump_flight_recorder(PATH) and (NULL)
 *   trace_script bad_path PATH   rank 1 asks for a timeline in a folder that does not exist
 *   trace_script contended PATH  a reducer step whose last gradient rank 1 marks 50 ms late
 *
 * Exits 0 when every call returned what the scenario expects, else prints
 * the call and its message and exits 1.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#define DDP_EXPERIMENTAL_API    /* ddp_reducer_* */
#include <ddp/ddp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int expect(const char* what, ddp_status got, ddp_status wanted) {
    if (got == wanted) return 0;
    fprintf(stderr, "%s returned %s, expected %s: %s\n", what, ddp_status_name(got), ddp_status_name(wanted),
            ddp_last_error_message());
    return 1;
}

#define EXPECT(call, wanted)                                \
    do {                                                    \
        if (expect(#call, (call), (wanted))) return 1;      \
    } while (0)

enum { SMALL = 8, LARGE = 40000 };

static ddp_tensor f32(float* data, int64_t count) {
    ddp_tensor t = {data, count, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    return t;
}

/* The script: 1 timeline_start, 2 broadcast, 3 allreduce (small: inside
 * agreement), 4 allreduce (fused buckets and one tensor in place), 5 async
 * allreduce, 6 reducer_create, 7 and 8 reducer steps, 9 check_replicas,
 * 10 barrier. */
static int timeline(ddp_comm* world, const char* path) {
    static float w1[SMALL], b1[SMALL], w2[LARGE], g[4][2 * SMALL], big[LARGE]; /* g: gaps, so packed */
    const char* param_names[] = {"layer1.weight", "layer1.bias", "layer2.weight"};
    const char* grad_names[] = {"g0", "g1", "g2", "big \"quoted\""};
    ddp_tensor params[3], grads[4];
    ddp_collective_options opts;
    ddp_request* request = NULL;
    ddp_reducer* reducer = NULL;
    int32_t identical = 0;
    int64_t i, step;

    params[0] = f32(w1, SMALL), params[1] = f32(b1, SMALL), params[2] = f32(w2, LARGE);
    for (i = 0; i < 4; ++i) grads[i] = f32(g[i], SMALL);
    grads[3] = f32(big, LARGE);
    EXPECT(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    opts.fusion_bytes = 64; /* g0..g2 in two buckets, big in place */

    EXPECT(ddp_timeline_start(world, path), DDP_OK);
    opts.names = param_names;
    EXPECT(ddp_broadcast_tensor_list(world, params, 3, 0, &opts), DDP_OK);
    opts.names = grad_names;
    EXPECT(ddp_allreduce_tensor_list(world, grads, 1, DDP_OP_SUM, &opts), DDP_OK);
    EXPECT(ddp_allreduce_tensor_list(world, grads, 4, DDP_OP_AVG, &opts), DDP_OK);
    EXPECT(ddp_allreduce_tensor_list_async(world, grads, 3, DDP_OP_SUM, &opts, &request), DDP_OK);
    EXPECT(ddp_request_free(request), DDP_OK);
    EXPECT(ddp_reducer_create(world, grads, 4, DDP_OP_AVG, &opts, &reducer), DDP_OK);
    for (step = 0; step < 2; ++step) {
        for (i = 3; i >= 0; --i) EXPECT(ddp_reducer_mark_ready(reducer, i), DDP_OK);
        EXPECT(ddp_reducer_wait(reducer), DDP_OK);
    }
    EXPECT(ddp_reducer_free(reducer), DDP_OK);
    EXPECT(ddp_check_replicas(world, params, 3, NULL, &identical), DDP_OK);
    EXPECT(ddp_barrier(world, NULL), DDP_OK);
    EXPECT(ddp_timeline_stop(world), DDP_OK);
    EXPECT(ddp_timeline_stop(world), DDP_OK); /* none recording: a no-op */
    return identical ? 0 : 1;
}

/* Calls #1-#3 on both ranks; rank 0 then waits in barrier #4 until its
 * timeout while rank 1 is still "computing"; rank 1's late barrier learns
 * that rank 0 gave up. */
static int timeout(ddp_comm* world, int rank) {
    float value = 1;
    ddp_tensor t = f32(&value, 1);
    int i;
    for (i = 0; i < 3; ++i) EXPECT(ddp_allreduce_tensor_list(world, &t, 1, DDP_OP_SUM, NULL), DDP_OK);
    if (rank == 1) sleep(3);
    EXPECT(ddp_barrier(world, NULL), DDP_ERR_TIMEOUT);
    return 0;
}

static int mismatch(ddp_comm* world, int rank) {
    float values[3] = {1, 2, 3};
    ddp_tensor t[3];
    int i;
    for (i = 0; i < 3; ++i) t[i] = f32(&values[i], 1);
    for (i = 0; i < 2; ++i) EXPECT(ddp_allreduce_tensor_list(world, t, 3, DDP_OP_SUM, NULL), DDP_OK);
    EXPECT(ddp_allreduce_tensor_list(world, t, rank == 0 ? 3 : 2, DDP_OP_SUM, NULL), DDP_ERR_MISMATCH);
    /* The error's message says what differed: no automatic dump. */
    {
        char automatic[4096];
        snprintf(automatic, sizeof automatic, "%s/ddp-flight-recorder.rank%d.json",
                 getenv("DDP_FLIGHT_RECORDER_DIR"), rank);
        if (access(automatic, F_OK) == 0) {
            fprintf(stderr, "a mismatch dumped the flight recorder to %s\n", automatic);
            return 1;
        }
    }
    EXPECT(ddp_dump_flight_recorder(world, NULL), DDP_OK); /* on demand: into that folder */
    return 0;
}

/* Rank 0 aborts after two calls; rank 1's next call learns of it. */
static int abort_after_two(ddp_comm* world, int rank) {
    float value = 1;
    ddp_tensor t = f32(&value, 1);
    int i;
    for (i = 0; i < 2; ++i) EXPECT(ddp_allreduce_tensor_list(world, &t, 1, DDP_OP_SUM, NULL), DDP_OK);
    if (rank == 0) EXPECT(ddp_comm_abort(world, "a NaN loss"), DDP_OK);
    EXPECT(ddp_barrier(world, NULL), DDP_ERR_TIMEOUT);
    return 0;
}

static int dump(ddp_comm* world, const char* path) {
    float value = 1;
    ddp_tensor t = f32(&value, 1);
    EXPECT(ddp_allreduce_tensor_list(world, &t, 1, DDP_OP_SUM, NULL), DDP_OK);
    EXPECT(ddp_broadcast_tensor_list(world, &t, 1, 0, NULL), DDP_OK);
    EXPECT(ddp_barrier(world, NULL), DDP_OK);
    EXPECT(ddp_dump_flight_recorder(world, path), DDP_OK);
    EXPECT(ddp_dump_flight_recorder(world, NULL), DDP_OK); /* DDP_FLIGHT_RECORDER_DIR unset: the job's folder */
    EXPECT(ddp_dump_flight_recorder(world, "/nonexistent-folder/x.json"), DDP_ERR_INVALID_ARGUMENT);
    if (!strstr(ddp_last_error_message(), "'/nonexistent-folder/x.json'")) { /* the name as given */
        fprintf(stderr, "the message does not name the file: %s\n", ddp_last_error_message());
        return 1;
    }
    return 0;
}

/* A bad path on rank 1 only: rank 1 names the file, rank 0 is told at once
 * (a mismatch naming rank 1), and the communicator stays usable. */
static int bad_path(ddp_comm* world, int rank, const char* path) {
    const char* message;
    EXPECT(ddp_timeline_start(world, rank == 1 ? "/nonexistent-folder/t.json" : path),
           rank == 1 ? DDP_ERR_INVALID_ARGUMENT : DDP_ERR_MISMATCH);
    message = ddp_last_error_message();
    if (!strstr(message, rank == 1 ? "/nonexistent-folder/t.rank1.json" : "rank 1")) {
        fprintf(stderr, "rank %d: the message does not say what was wrong: %s\n", rank, message);
        return 1;
    }
    EXPECT(ddp_timeline_start(world, NULL), DDP_ERR_INVALID_ARGUMENT);
    EXPECT(ddp_barrier(world, NULL), DDP_OK);
    EXPECT(ddp_timeline_start(world, path), DDP_OK);
    EXPECT(ddp_timeline_start(world, path), DDP_ERR_INVALID_ARGUMENT); /* already recording, on both */
    EXPECT(ddp_barrier(world, NULL), DDP_OK);
    return 0; /* ddp_finalize completes the file */
}

/* Rank 0's wait for the bucket that rank 1 starts late outlasts its spin
 * and sleeps: an "asleep" event on rank 0's timeline, and at
 * DDP_LOG_LEVEL=debug a line saying the rank is contended. */
static int contended(ddp_comm* world, int rank, const char* path) {
    static float g[4][SMALL], big[LARGE];
    ddp_tensor grads[4];
    ddp_collective_options opts;
    ddp_reducer* reducer = NULL;
    int64_t i;
    for (i = 0; i < 4; ++i) grads[i] = f32(g[i], SMALL);
    grads[3] = f32(big, LARGE);
    EXPECT(ddp_collective_options_init(&opts, sizeof opts), DDP_OK);
    opts.fusion_bytes = 64;
    EXPECT(ddp_timeline_start(world, path), DDP_OK);
    EXPECT(ddp_reducer_create(world, grads, 4, DDP_OP_SUM, &opts, &reducer), DDP_OK);
    for (i = 3; i >= 1; --i) EXPECT(ddp_reducer_mark_ready(reducer, i), DDP_OK);
    if (rank == 1) {
        const struct timespec late = {0, 50 * 1000 * 1000};
        nanosleep(&late, NULL);
    }
    EXPECT(ddp_reducer_mark_ready(reducer, 0), DDP_OK);
    EXPECT(ddp_reducer_wait(reducer), DDP_OK);
    EXPECT(ddp_reducer_free(reducer), DDP_OK);
    EXPECT(ddp_timeline_stop(world), DDP_OK);
    return 0;
}

int main(int argc, char** argv) {
    ddp_comm* world = NULL;
    int32_t rank = 0;
    int failed;
    const char* mode = argc > 1 ? argv[1] : "";
    const char* path = argc > 2 ? argv[2] : NULL;
    if (ddp_init(NULL, &world) != DDP_OK || ddp_rank(world, &rank) != DDP_OK) {
        fprintf(stderr, "ddp_init: %s\n", ddp_last_error_message());
        return 1;
    }
    if (strcmp(mode, "timeline") == 0)
        failed = timeline(world, path);
    else if (strcmp(mode, "timeout") == 0)
        failed = timeout(world, rank);
    else if (strcmp(mode, "mismatch") == 0)
        failed = mismatch(world, rank);
    else if (strcmp(mode, "abort") == 0)
        failed = abort_after_two(world, rank);
    else if (strcmp(mode, "dump") == 0)
        failed = dump(world, path);
    else if (strcmp(mode, "bad_path") == 0)
        failed = bad_path(world, rank, path);
    else if (strcmp(mode, "contended") == 0)
        failed = contended(world, rank, path);
    else {
        fprintf(stderr, "usage: trace_script timeline|timeout|mismatch|abort|dump|bad_path|contended [PATH]\n");
        failed = 1;
    }
    if (ddp_finalize(world) != DDP_OK) {
        fprintf(stderr, "ddp_finalize: %s\n", ddp_last_error_message());
        return 1;
    }
    return failed;
}
