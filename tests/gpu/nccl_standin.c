/* A fault-injecting stand-in for libnccl.so.2, loaded by libddp through
 * DDP_NCCL_LIBRARY in tests on machines without a GPU. It implements the
 * functions libddp resolves, moves no data, and misbehaves on request, so
 * that libddp's reactions (loading checks, a setup that never completes, a
 * setup or asynchronous error, abort) can be tested. It proves nothing
 * about NCCL or GPU data paths.
 *
 * Built in four forms: as is; with STANDIN_VERSION set to an old version
 * code; with STANDIN_WITHOUT_INIT_CONFIG, lacking ncclCommInitRankConfig;
 * with STANDIN_WITHOUT_SPLIT, lacking ncclCommSplit (an NCCL before 2.18.1).
 * At run time NCCL_STANDIN_MODE picks the behaviour: "ok" (default),
 * "setup_hangs" (the communicator stays in progress), "setup_fails",
 * "async_error" (setup succeeds, then an asynchronous error is reported),
 * "split_hangs" (ncclCommSplit never finishes until the parent is
 * aborted), "split_fails" (the new communicator reports an error),
 * "split_refused" (ncclCommSplit itself returns an error), "launch_blocks"
 * (ncclGroupEnd waits, as a blocking communicator's launch can, until the
 * abort flag is raised: the split's own abort, or the set-up communicator's
 * when that was made with splitShare, as NCCL shares the flag only then;
 * it gives up after 3 s, so that a test of it ends).
 *
 * ncclCommSplit behaves as NCCL's non-blocking split does: it returns
 * ncclInProgress with the new handle still NULL, and a thread of its own
 * stores the handle when the split's job ends (the parent is in progress
 * until then); aborting the parent ends the job, which stores the handle
 * it made, and returns once it has. Several threads may set up and split
 * at once (the ranks of a local group): each split has a job of its own,
 * and each setup records the rank, size and unique id it was given. */
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef STANDIN_VERSION
#define STANDIN_VERSION 22809
#endif

static int aborts = 0;
static int polls = 0; /* ncclCommGetAsyncError calls since the last setup */
static char last_error[256] = "";

/* How many communicators were aborted; for the tests (found by dlsym). */
int standin_abort_count(void) { return aborts; }

/* The handle ncclCommSplit gives, told apart from setup's (and found by the tests). */
int standin_split_comm = 0;
static int split_aborts = 0;
/* The configs of the last setup and split (-1: none yet); for the tests. */
int standin_init_share = -1;
static atomic_int split_comm_aborted = 0;
int standin_split_blocking = -1;
int standin_split_share = -1;

/* How many aborts were of a communicator from ncclCommSplit. */
int standin_split_abort_count(void) { return split_aborts; }

/* What each setup was given, by rank (up to 8); for the tests. */
int standin_init_size[8];
unsigned char standin_init_id[8];
static atomic_int unique_ids = 0;

/* The splits' jobs: NCCL's own threads, which store the new handles. */
#define MAX_SPLIT_JOBS 16
struct split_job {
    pthread_t thread;
    ncclComm_t* out;
    int color;
};
static struct split_job split_jobs[MAX_SPLIT_JOBS];
static int split_jobs_started = 0; /* under jobs_mutex */
static pthread_mutex_t jobs_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int split_pending = 0; /* jobs not ended: their parents are in progress until then */
static atomic_int parent_aborted = 0;

static void pause_ms(long ms) {
    struct timespec wait = {0, ms * 1000000L};
    nanosleep(&wait, NULL);
}

#ifndef STANDIN_WITHOUT_SPLIT
static const char* mode(void);

static void* split_job(void* argument) {
    const struct split_job* job = argument;
    if (strcmp(mode(), "split_hangs") == 0) {
        while (!atomic_load(&parent_aborted)) pause_ms(1);
    } else {
        pause_ms(20);
    }
    *job->out = job->color == NCCL_SPLIT_NOCOLOR ? NULL : (ncclComm_t)(&standin_split_comm);
    atomic_fetch_sub(&split_pending, 1); /* after the store: a poll that sees it done sees the handle */
    return NULL;
}
#endif

/* Waits for every split job started so far. */
static void join_split_jobs(void) {
    pthread_mutex_lock(&jobs_mutex);
    for (int i = 0; i < split_jobs_started; ++i) pthread_join(split_jobs[i].thread, NULL);
    split_jobs_started = 0;
    pthread_mutex_unlock(&jobs_mutex);
}

static const char* mode(void) {
    const char* value = getenv("NCCL_STANDIN_MODE");
    return value != NULL ? value : "ok";
}

ncclResult_t ncclGetVersion(int* version) {
    *version = STANDIN_VERSION;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    memset(id, 7 + atomic_fetch_add(&unique_ids, 1), sizeof *id); /* each call its own */
    return ncclSuccess;
}

#ifndef STANDIN_WITHOUT_INIT_CONFIG
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
    if (rank >= 0 && rank < 8) {
        standin_init_size[rank] = nranks;
        standin_init_id[rank] = (unsigned char)id.internal[0];
    }
    standin_init_share = config->splitShare;
    polls = 0;
    atomic_store(&parent_aborted, 0);
    atomic_store(&split_comm_aborted, 0);
    *comm = (ncclComm_t)(&aborts); /* any non-null handle */
    return strcmp(mode(), "ok") == 0 || strcmp(mode(), "async_error") == 0 ? ncclSuccess : ncclInProgress;
}
#endif

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
    ++polls;
    if (comm == (ncclComm_t)(&standin_split_comm)) {
        if (strcmp(mode(), "split_hangs") == 0) {
            *state = ncclInProgress;
        } else if (strcmp(mode(), "split_fails") == 0) {
            strcpy(last_error, "stand-in: the split's ranks could not connect");
            *state = ncclSystemError;
        } else {
            *state = ncclSuccess;
        }
        return ncclSuccess;
    }
    if (atomic_load(&split_pending)) {
        *state = ncclInProgress;
    } else if (strcmp(mode(), "setup_hangs") == 0) {
        *state = ncclInProgress;
    } else if (strcmp(mode(), "setup_fails") == 0 || (strcmp(mode(), "async_error") == 0 && polls > 2)) {
        strcpy(last_error, "stand-in: the peer's proxy connection was refused");
        *state = ncclRemoteError;
    } else {
        *state = ncclSuccess;
    }
    return ncclSuccess;
}

#ifndef STANDIN_WITHOUT_SPLIT
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
    (void)comm, (void)key;
    standin_split_blocking = config->blocking;
    standin_split_share = config->splitShare;
    if (strcmp(mode(), "split_refused") == 0) {
        strcpy(last_error, "stand-in: ncclCommSplit refused the call");
        *newcomm = NULL;
        return ncclInvalidUsage;
    }
    atomic_store(&split_comm_aborted, 0);
    *newcomm = NULL;
    pthread_mutex_lock(&jobs_mutex);
    if (split_jobs_started == MAX_SPLIT_JOBS) {
        pthread_mutex_unlock(&jobs_mutex);
        join_split_jobs();
        pthread_mutex_lock(&jobs_mutex);
    }
    struct split_job* job = &split_jobs[split_jobs_started];
    job->out = newcomm;
    job->color = color;
    atomic_fetch_add(&split_pending, 1);
    if (pthread_create(&job->thread, NULL, split_job, job) == 0) {
        ++split_jobs_started;
    } else {
        atomic_fetch_sub(&split_pending, 1);
    }
    pthread_mutex_unlock(&jobs_mutex);
    return ncclInProgress;
}
#endif

ncclResult_t ncclCommFinalize(ncclComm_t comm) { (void)comm; return ncclSuccess; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm != (ncclComm_t)(&standin_split_comm)) join_split_jobs();
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm == (ncclComm_t)(&standin_split_comm)) {
        ++split_aborts;
        atomic_store(&split_comm_aborted, 1);
    } else {
        atomic_store(&parent_aborted, 1); /* ends the splits' jobs, which store their handles */
        join_split_jobs();
    }
    ++aborts;
    return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclInProgress: return "operation in progress";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclSystemError: return "unhandled system error";
    case ncclInvalidUsage: return "invalid usage";
    default: return "unhandled stand-in error";
    }
}

const char* ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return last_error;
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) {
    if (strcmp(mode(), "launch_blocks") != 0) return ncclSuccess;
    for (int waited = 0; waited < 3000; ++waited) {
        if ((atomic_load(&parent_aborted) && standin_init_share == 1) || atomic_load(&split_comm_aborted)) {
            strcpy(last_error, "stand-in: the launch ended on the abort flag");
            return ncclInternalError;
        }
        pause_ms(1);
    }
    strcpy(last_error, "stand-in: no abort flag ended the launch in 3 s");
    return ncclInternalError;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)type, (void)op, (void)comm, (void)stream;
    return ncclInvalidUsage; /* moves no data: never pretend to */
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)type, (void)op, (void)root, (void)comm, (void)stream;
    return ncclInvalidUsage;
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)type, (void)root, (void)comm, (void)stream;
    return ncclInvalidUsage;
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)type, (void)comm, (void)stream;
    return ncclInvalidUsage;
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
    (void)send, (void)recv, (void)count, (void)type, (void)op, (void)comm, (void)stream;
    return ncclInvalidUsage;
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    (void)send, (void)count, (void)type, (void)peer, (void)comm, (void)stream;
    return ncclInvalidUsage;
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
    (void)recv, (void)count, (void)type, (void)peer, (void)comm, (void)stream;
    return ncclInvalidUsage;
}
