/*
 * A small MLP trained data-parallel with libddp.
 *
 * Every rank builds the same synthetic regression set (y = sin(x . w*) plus a
 * bias), takes its shard with ddp_shard_indices, computes gradients on its
 * own mini-batches and averages them with ddp_allreduce_tensor_list, so all
 * ranks take the same SGD step. Rank 0 initialises the parameters and
 * broadcasts them; at the end ddp_check_replicas confirms that every rank
 * holds the same parameters.
 *
 *   mpirun -np 2 build/examples/c/train_mlp
 *
 * Exits 0 when the loss fell below a fifth of its start and the replicas
 * agree, 1 otherwise.
 */
#include <ddp/ddp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { INPUTS = 8, HIDDEN = 32, SAMPLES = 4096, BATCH = 32, EPOCHS = 30 };
static const float LEARNING_RATE = 0.2f;

typedef struct {
    float w1[HIDDEN * INPUTS], b1[HIDDEN], w2[HIDDEN], b2[1];
} Params;

/* Exits with the library's own message when a call fails. */
static void check(ddp_status status, const char* what) {
    if (status == DDP_OK) return;
    fprintf(stderr, "%s failed: %s: %s\n", what, ddp_status_name(status), ddp_last_error_message());
    exit(2);
}

static uint64_t lcg_state;
static float uniform(void) { /* in [-1, 1) */
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

static void make_data(float* x, float* y) {
    float teacher[INPUTS];
    lcg_state = 12345; /* the same data set on every rank */
    for (int j = 0; j < INPUTS; ++j) teacher[j] = uniform();
    for (int i = 0; i < SAMPLES; ++i) {
        float dot = 0;
        for (int j = 0; j < INPUTS; ++j) {
            x[i * INPUTS + j] = uniform();
            dot += x[i * INPUTS + j] * teacher[j];
        }
        y[i] = sinf(2.0f * dot) + 0.5f;
    }
}

/* Accumulates the gradient of the squared error of one sample into g;
 * returns that squared error. */
static float backprop(const Params* p, const float* x, float y, Params* g) {
    float h[HIDDEN], out = p->b2[0];
    for (int k = 0; k < HIDDEN; ++k) {
        float a = p->b1[k];
        for (int j = 0; j < INPUTS; ++j) a += p->w1[k * INPUTS + j] * x[j];
        h[k] = tanhf(a);
        out += p->w2[k] * h[k];
    }
    const float err = out - y;
    g->b2[0] += err;
    for (int k = 0; k < HIDDEN; ++k) {
        g->w2[k] += err * h[k];
        const float da = err * p->w2[k] * (1 - h[k] * h[k]);
        g->b1[k] += da;
        for (int j = 0; j < INPUTS; ++j) g->w1[k * INPUTS + j] += da * x[j];
    }
    return err * err;
}

static void describe(Params* p, ddp_tensor t[4]) {
    ddp_tensor list[4] = {
        {p->w1, HIDDEN * INPUTS, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
        {p->b1, HIDDEN, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
        {p->w2, HIDDEN, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
        {p->b2, 1, DDP_DTYPE_F32, DDP_DEVICE_CPU, 0, 0},
    };
    memcpy(t, list, sizeof list);
}

int main(void) {
    ddp_comm* world = NULL;
    check(ddp_init(NULL, &world), "ddp_init");
    int32_t rank = 0, size = 1;
    check(ddp_rank(world, &rank), "ddp_rank");
    check(ddp_size(world, &size), "ddp_size");

    static float x[SAMPLES * INPUTS], y[SAMPLES];
    make_data(x, y);

    /* Different on every rank until the broadcast makes them rank 0's. */
    Params params, grads;
    lcg_state = 777 + (uint64_t)rank;
    float* flat = (float*)&params;
    for (size_t i = 0; i < sizeof params / sizeof(float); ++i) flat[i] = 0.3f * uniform();
    ddp_tensor param_list[4], grad_list[4];
    describe(&params, param_list);
    describe(&grads, grad_list);
    check(ddp_broadcast_tensor_list(world, param_list, 4, 0, NULL), "ddp_broadcast_tensor_list");

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
            memset(&grads, 0, sizeof grads);
            for (int64_t i = start; i < end; ++i)
                epoch_loss += backprop(&params, &x[mine[i] * INPUTS], y[mine[i]], &grads);
            const float scale = 1.0f / (float)(end - start);
            float* g = (float*)&grads;
            for (size_t i = 0; i < sizeof grads / sizeof(float); ++i) g[i] *= scale;
            check(ddp_allreduce_tensor_list(world, grad_list, 4, DDP_OP_AVG, NULL),
                  "ddp_allreduce_tensor_list");
            float* p = (float*)&params;
            for (size_t i = 0; i < sizeof params / sizeof(float); ++i) p[i] -= LEARNING_RATE * g[i];
        }
        /* The mean loss over every rank's samples. */
        loss = epoch_loss / (double)count;
        ddp_tensor loss_tensor = {&loss, 1, DDP_DTYPE_F64, DDP_DEVICE_CPU, 0, 0};
        check(ddp_allreduce_tensor_list(world, &loss_tensor, 1, DDP_OP_AVG, NULL), "loss allreduce");
        if (epoch == 0) first_loss = loss;
        if (rank == 0) {
            char line[96];
            snprintf(line, sizeof line, "epoch %2d  loss %.5f", epoch + 1, loss);
            check(ddp_log(world, DDP_LOG_INFO, line), "ddp_log");
        }
    }

    int32_t identical = 0;
    check(ddp_check_replicas(world, param_list, 4, NULL, &identical), "ddp_check_replicas");
    const int converged = loss < first_loss / 5;
    if (rank == 0) {
        char line[160];
        snprintf(line, sizeof line, "%s: loss %.5f -> %.5f on %d ranks; replicas %s", converged ? "converged" : "NOT converged",
                 first_loss, loss, size, identical ? "identical" : ddp_last_error_message());
        check(ddp_log(world, DDP_LOG_INFO, line), "ddp_log");
    }
    free(mine);
    check(ddp_finalize(world), "ddp_finalize");
    return converged && identical ? 0 : 1;
}
