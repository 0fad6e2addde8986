/*
 * The model, data and loss shared by train_mlp.c and train_mlp_zero.c: a
 * one-hidden-layer tanh MLP on a synthetic regression set (y = sin(x . w*)
 * plus a bias), the same on every rank, and its squared-error backprop.
 */
#ifndef DDP_EXAMPLE_MLP_H
#define DDP_EXAMPLE_MLP_H

#include <ddp/ddp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { INPUTS = 8, HIDDEN = 32, SAMPLES = 4096, BATCH = 32, EPOCHS = 30 };
static const float LEARNING_RATE = 0.2f;

typedef struct {
    float w1[HIDDEN * INPUTS], b1[HIDDEN], w2[HIDDEN], b2[1];
} Params;

/* The gradients, in Params' order: views into wherever the program keeps them. */
enum { W1, B1, W2, B2, N_TENSORS };
typedef struct {
    float* of[N_TENSORS];
} Grads;

/* Exits with the library's own message when a call fails. _Exit, not exit:
 * where ranks are threads (--local) a peer may be inside libddp, whose
 * static objects exit() would destroy under it. */
static void check(ddp_status status, const char* what) {
    if (status == DDP_OK) return;
    fprintf(stderr, "%s failed: %s: %s\n", what, ddp_status_name(status), ddp_last_error_message());
    fflush(stdout);
    _Exit(2);
}

static _Thread_local uint64_t lcg_state; /* each thread its own: ranks may be threads */
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
static float backprop(const Params* p, const float* x, float y, const Grads* g) {
    float h[HIDDEN], out = p->b2[0];
    for (int k = 0; k < HIDDEN; ++k) {
        float a = p->b1[k];
        for (int j = 0; j < INPUTS; ++j) a += p->w1[k * INPUTS + j] * x[j];
        h[k] = tanhf(a);
        out += p->w2[k] * h[k];
    }
    const float err = out - y;
    g->of[B2][0] += err;
    for (int k = 0; k < HIDDEN; ++k) {
        g->of[W2][k] += err * h[k];
        const float da = err * p->w2[k] * (1 - h[k] * h[k]);
        g->of[B1][k] += da;
        for (int j = 0; j < INPUTS; ++j) g->of[W1][k * INPUTS + j] += da * x[j];
    }
    return err * err;
}

/* Different on every rank until the broadcast makes them rank 0's. */
static void init_params(Params* p, int32_t rank) {
    lcg_state = 777 + (uint64_t)rank;
    float* flat = (float*)p;
    for (size_t i = 0; i < sizeof *p / sizeof(float); ++i) flat[i] = 0.3f * uniform();
}

/* Rank 0 logs the epoch's loss (the mean over every rank's samples). */
static void log_epoch(ddp_comm* world, int32_t rank, int epoch, double loss) {
    if (rank != 0) return;
    char line[96];
    snprintf(line, sizeof line, "epoch %2d  loss %.5f", epoch + 1, loss);
    check(ddp_log(world, DDP_LOG_INFO, line), "ddp_log");
}

#endif
