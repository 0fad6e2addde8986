/*
 * A small MLP trained data-parallel with libddp.
 *
 * Every rank builds the same synthetic regression set (y = sin(x . w*) plus a
 * bias), takes its shard with ddp_shard_indices, computes gradients on its
 * own mini-batches and averages them, so all ranks take the same SGD step.
 * The gradients live in a reducer's buckets (ddp_reducer_*, persistent
 * gradient buckets): backprop writes straight into them, each gradient is
 * marked ready as the backward pass finishes it (last layer first), and one
 * ddp_reducer_wait per step completes the averaging. Rank 0 initialises the
 * parameters and broadcasts them; at the end ddp_check_replicas confirms
 * that every rank holds the same parameters. The model, data and loss are
 * in mlp.h, shared with train_mlp_zero.c.
 *
 *   mpirun -np 2 build/examples/c/train_mlp
 *   build/examples/c/train_mlp --local 2     (2 ranks as threads of one process:
 *                                             ddp_init_local, no mpirun; the same losses)
 *   mpirun -np 2 build/examples/c/train_mlp --local 2
 *                                            (4 ranks: 2 processes of 2 threads each;
 *                                             the losses of 4 processes)
 *
 * Exits 0 when the loss fell below a fifth of its start and the replicas
 * agree, 1 otherwise.
 */
#define DDP_EXPERIMENTAL_API /* ddp_reducer_*, ddp_init_local */
#include <pthread.h>
#include <string.h>

#include "mlp.h"

static void describe(Params* p, ddp_tensor t[N_TENSORS]) {
    ddp_tensor list[N_TENSORS] = {
        {p->w1, HIDDEN * INPUTS, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
        {p->b1, HIDDEN, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
        {p->w2, HIDDEN, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
        {p->b2, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
    };
    memcpy(t, list, sizeof list);
}

/* Trains on `world` (a process's rank, or a thread's); 0 when it converged. */
static int train(ddp_comm* world) {
    int32_t rank = 0, size = 1;
    check(ddp_rank(world, &rank), "ddp_rank");
    check(ddp_size(world, &size), "ddp_size");

    float* x = malloc(SAMPLES * INPUTS * sizeof *x);
    float* y = malloc(SAMPLES * sizeof *y);
    make_data(x, y);

    Params params;
    init_params(&params, rank);
    ddp_tensor param_list[N_TENSORS];
    describe(&params, param_list);
    check(ddp_broadcast_tensor_list(world, param_list, N_TENSORS, 0, NULL), "ddp_broadcast_tensor_list");

    /* Registered once: same shapes as the parameters. */
    ddp_reducer* reducer = NULL;
    check(ddp_reducer_create(world, param_list, N_TENSORS, DDP_OP_AVG, NULL, &reducer), "ddp_reducer_create");
    Grads grads;
    int64_t grad_counts[N_TENSORS];
    for (int t = 0; t < N_TENSORS; ++t) {
        ddp_tensor view;
        check(ddp_reducer_gradient(reducer, t, &view), "ddp_reducer_gradient");
        grads.of[t] = view.data;
        grad_counts[t] = view.count;
    }

    ddp_shard_options shard;
    check(ddp_shard_options_init(&shard, sizeof shard), "ddp_shard_options_init");
    shard.seed = 2024;
    int64_t per_rank = 0;
    check(ddp_shard_count(SAMPLES, size, &shard, &per_rank), "ddp_shard_count");
    int64_t* mine = malloc((size_t)per_rank * sizeof *mine);

    double first_loss = 0, loss = 0;
    for (int epoch = 0; epoch < EPOCHS; ++epoch) {
        shard.epoch = (uint64_t)epoch;
        int64_t count = 0;
        check(ddp_shard_indices(SAMPLES, rank, size, &shard, mine, per_rank, &count), "ddp_shard_indices");
        double epoch_loss = 0;
        for (int64_t start = 0; start < count; start += BATCH) {
            const int64_t end = start + BATCH < count ? start + BATCH : count;
            for (int t = 0; t < N_TENSORS; ++t) memset(grads.of[t], 0, (size_t)grad_counts[t] * sizeof(float));
            for (int64_t i = start; i < end; ++i)
                epoch_loss += backprop(&params, &x[mine[i] * INPUTS], y[mine[i]], &grads);
            /* The backward pass finishes the last layer first: mark in that order. */
            const float scale = 1.0f / (float)(end - start);
            for (int t = N_TENSORS - 1; t >= 0; --t) {
                for (int64_t i = 0; i < grad_counts[t]; ++i) grads.of[t][i] *= scale;
                check(ddp_reducer_mark_ready(reducer, t), "ddp_reducer_mark_ready");
            }
            check(ddp_reducer_wait(reducer), "ddp_reducer_wait");
            for (int t = 0; t < N_TENSORS; ++t) {
                float* p = param_list[t].data;
                for (int64_t i = 0; i < grad_counts[t]; ++i) p[i] -= LEARNING_RATE * grads.of[t][i];
            }
        }
        /* The mean loss over every rank's samples. */
        loss = epoch_loss / (double)count;
        ddp_tensor loss_tensor = {&loss, 1, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
        check(ddp_allreduce_tensor_list(world, &loss_tensor, 1, DDP_OP_AVG, NULL), "loss allreduce");
        if (epoch == 0) first_loss = loss;
        log_epoch(world, rank, epoch, loss);
    }

    int32_t identical = 0;
    check(ddp_check_replicas(world, param_list, N_TENSORS, NULL, &identical), "ddp_check_replicas");
    const int converged = loss < first_loss / 5;
    if (rank == 0) {
        char line[160];
        snprintf(line, sizeof line, "%s: loss %.5f -> %.5f on %d ranks; replicas %s", converged ? "converged" : "NOT converged",
                 first_loss, loss, size, identical ? "identical" : ddp_last_error_message());
        check(ddp_log(world, DDP_LOG_INFO, line), "ddp_log");
    }
    free(mine);
    free(x);
    free(y);
    check(ddp_reducer_free(reducer), "ddp_reducer_free");
    check(ddp_finalize(world), "ddp_finalize");
    return converged && identical ? 0 : 1;
}

static void* train_thread(void* comm) { return (void*)(intptr_t)train(comm); }

/* n ranks as threads of this process, each training on its own communicator. */
static int train_local(int n) {
    if (n < 1 || n > 64) {
        fprintf(stderr, "--local N: N is 1 to 64 here, not %d\n", n);
        return 2;
    }
    ddp_comm* comms[64];
    pthread_t threads[64];
    check(ddp_init_local(n, NULL, NULL, comms), "ddp_init_local");
    for (int i = 0; i < n; ++i)
        if (pthread_create(&threads[i], NULL, train_thread, comms[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    int failed = 0;
    for (int i = 0; i < n; ++i) {
        void* result = NULL;
        pthread_join(threads[i], &result);
        failed |= (int)(intptr_t)result;
    }
    return failed;
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "--local") == 0) return train_local(atoi(argv[2]));
    if (argc != 1) {
        fprintf(stderr, "usage: %s            (under mpirun: one rank per process)\n"
                        "       %s --local N  (N ranks as threads of this process; under mpirun,\n"
                        "                          N threads in each process, one group)\n", argv[0], argv[0]);
        return 2;
    }
    ddp_comm* world = NULL;
    check(ddp_init(NULL, &world), "ddp_init");
    return train(world);
}
