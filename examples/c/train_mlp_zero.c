/*
 * train_mlp.c's MLP (mlp.h: same data, initialisation, batches, learning
 * rate) trained with ZeRO stage 1: the optimizer state is sharded, so each
 * rank keeps it for 1/size of the parameters only. Every step
 *   1. reduce_scatter (AVG) the gradients: each rank gets the average of
 *      its shard only;
 *   2. the optimizer updates this rank's shard of the parameters;
 *   3. allgather the parameters, in place from this rank's block, so every
 *      rank holds the whole model for the next forward pass.
 * The optimizer is SGD with momentum (v = m v + g; p -= lr v), the state
 * to shard being v. With the default m = 0 it is train_mlp.c's plain SGD
 * bit for bit, and the logged losses equal train_mlp.c's; an argument sets m:
 *
 *   mpirun -np 2 build/examples/c/train_mlp_zero [MOMENTUM]
 *
 * Exits 0 when the loss fell below a fifth of its start and the replicas
 * agree, 1 otherwise.
 */
#include <stddef.h>
#include <string.h>

#include "mlp.h"

enum { N_PARAMS = sizeof(Params) / sizeof(float) };

int main(int argc, char** argv) {
    const float momentum = argc > 1 ? strtof(argv[1], NULL) : 0.0f;
    ddp_comm* world = NULL;
    check(ddp_init(NULL, &world), "ddp_init");
    int32_t rank = 0, size = 1;
    check(ddp_rank(world, &rank), "ddp_rank");
    check(ddp_size(world, &size), "ddp_size");

    static float x[SAMPLES * INPUTS], y[SAMPLES];
    make_data(x, y);

    /* One flat buffer each for parameters and gradients, padded to a
     * multiple of size, rather than per-tensor lists: reduce_scatter and
     * allgather need every count to be a multiple of size, and per tensor
     * that would pad each one (b2 has 1 element) and split every rank's
     * optimizer work into 4 ragged pieces; flat, each rank owns one
     * contiguous shard and the padding (zeros, never read by the model)
     * is at most size - 1 floats. */
    const int64_t shard = (N_PARAMS + size - 1) / size, padded = shard * size;
    float* params = calloc((size_t)padded, sizeof(float));
    float* grads_flat = calloc((size_t)padded, sizeof(float));
    float* grad_shard = calloc((size_t)shard, sizeof(float));
    float* velocity = calloc((size_t)shard, sizeof(float)); /* the sharded optimizer state */
    if (!params || !grads_flat || !grad_shard || !velocity) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    Params* model = (Params*)params;
    init_params(model, rank);
    const ddp_tensor all_params = {params, padded, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    check(ddp_broadcast_tensor_list(world, &all_params, 1, 0, NULL), "ddp_broadcast_tensor_list");

    Grads grads = {{grads_flat + offsetof(Params, w1) / sizeof(float), grads_flat + offsetof(Params, b1) / sizeof(float),
                    grads_flat + offsetof(Params, w2) / sizeof(float), grads_flat + offsetof(Params, b2) / sizeof(float)}};
    float* my_params = params + rank * shard;
    const ddp_tensor all_grads = {grads_flat, padded, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    const ddp_tensor my_grads = {grad_shard, shard, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};
    const ddp_tensor my_block = {my_params, shard, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0};

    ddp_shard_options shard_opts;
    check(ddp_shard_options_init(&shard_opts, sizeof shard_opts), "ddp_shard_options_init");
    shard_opts.seed = 2024;
    int64_t per_rank = 0;
    check(ddp_shard_count(SAMPLES, size, &shard_opts, &per_rank), "ddp_shard_count");
    int64_t* mine = malloc((size_t)per_rank * sizeof *mine);

    double first_loss = 0, loss = 0;
    for (int epoch = 0; epoch < EPOCHS; ++epoch) {
        shard_opts.epoch = (uint64_t)epoch;
        int64_t count = 0;
        check(ddp_shard_indices(SAMPLES, rank, size, &shard_opts, mine, per_rank, &count), "ddp_shard_indices");
        double epoch_loss = 0;
        for (int64_t start = 0; start < count; start += BATCH) {
            const int64_t end = start + BATCH < count ? start + BATCH : count;
            memset(grads_flat, 0, N_PARAMS * sizeof(float));
            for (int64_t i = start; i < end; ++i)
                epoch_loss += backprop(model, &x[mine[i] * INPUTS], y[mine[i]], &grads);
            const float scale = 1.0f / (float)(end - start);
            for (int i = 0; i < N_PARAMS; ++i) grads_flat[i] *= scale;
            check(ddp_reduce_scatter_tensor_list(world, &all_grads, &my_grads, 1, DDP_OP_AVG, NULL),
                  "ddp_reduce_scatter_tensor_list");
            for (int64_t i = 0; i < shard; ++i) {
                velocity[i] = momentum * velocity[i] + grad_shard[i];
                my_params[i] -= LEARNING_RATE * velocity[i];
            }
            check(ddp_allgather_tensor_list(world, &my_block, &all_params, 1, NULL), "ddp_allgather_tensor_list");
        }
        loss = epoch_loss / (double)count;
        ddp_tensor loss_tensor = {&loss, 1, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
        check(ddp_allreduce_tensor_list(world, &loss_tensor, 1, DDP_OP_AVG, NULL), "loss allreduce");
        if (epoch == 0) first_loss = loss;
        log_epoch(world, rank, epoch, loss);
    }

    int32_t identical = 0;
    check(ddp_check_replicas(world, &all_params, 1, NULL, &identical), "ddp_check_replicas");
    const int converged = loss < first_loss / 5;
    if (rank == 0) {
        char line[224];
        snprintf(line, sizeof line, "%s: loss %.5f -> %.5f on %d ranks; replicas %s", converged ? "converged" : "NOT converged",
                 first_loss, loss, size, identical ? "identical" : ddp_last_error_message());
        check(ddp_log(world, DDP_LOG_INFO, line), "ddp_log");
        snprintf(line, sizeof line, "optimizer state per rank: %lld bytes (unsharded: %lld bytes)",
                 (long long)(shard * (int64_t)sizeof(float)), (long long)(N_PARAMS * sizeof(float)));
        check(ddp_log(world, DDP_LOG_INFO, line), "ddp_log");
    }
    free(mine);
    free(velocity);
    free(grad_shard);
    free(grads_flat);
    free(params);
    check(ddp_finalize(world), "ddp_finalize");
    return converged && identical ? 0 : 1;
}
