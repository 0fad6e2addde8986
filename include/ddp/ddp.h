/*
 * libddp: the communication core of data-parallel training, behind one C ABI.
 *
 * A program starts a process group with ddp_init(), averages its gradient
 * tensors with ddp_allreduce_tensor_list(), broadcasts parameters and
 * optimizer state from a root, splits its data set with ddp_shard_indices(),
 * and ends with ddp_finalize(). The same calls serve C, Julia (ccall), Python
 * (ctypes) and Rust (bindgen).
 *
 * Conventions (they hold for every function below unless its comment says
 * otherwise):
 *  - Every operation returns a ddp_status; DDP_OK is 0. Results come back
 *    through out-pointers, which are written only on success.
 *  - On failure, ddp_last_error_message() returns a sentence naming the
 *    argument, the rank and the tensor index involved. The message is
 *    thread-local and stays until the next failing call on that thread.
 *  - No function aborts the process or lets an exception escape on bad input.
 *  - Options structs begin with `struct_size`. Fill one with its
 *    ddp_*_options_init(&opts, sizeof opts) function, then change fields;
 *    NULL means defaults. The size you pass is the one your program was
 *    compiled with, so a library whose struct has since grown writes only
 *    the fields you know of and gives the newer ones their defaults. New
 *    fields are only ever added at the end.
 *  - Every collective takes an options pointer (ddp_collective_options;
 *    NULL = defaults), so per-call settings can be added without new symbols.
 *  - Default ops: the C functions take the op explicitly. Bindings that
 *    default it use SUM, as MPI, mpi4py and torch.distributed do; averaging
 *    gradients is asked for by name (DDP_OP_AVG, allreduce_gradients).
 *  - A ddp_comm may be used from one thread at a time (as an MPI
 *    communicator or an NCCL communicator). Pure functions (shard arithmetic,
 *    version and status queries) are safe from any thread.
 *  - A ddp_comm may be used from one thread at a time. A second thread that
 *    enters a collective (or an async submission) on a communicator while
 *    another thread is inside one gets DDP_ERR_INVALID_ARGUMENT at once
 *    instead of corrupting the first call.
 *  - Collectives must be issued in the same order on every rank. Before a
 *    collective moves data, the ranks agree that they passed the same list
 *    (tensor count, each tensor's dtype, count and device type, op, root,
 *    fusion size); when they did not, every rank returns DDP_ERR_MISMATCH
 *    instead of hanging or reducing the wrong bytes. A rank whose own
 *    arguments are invalid still takes part, so its peers fail at once.
 *    That agreement costs one 16-byte allreduce per call.
 *  - Timeouts: the whole collective (agreement and data) must finish within
 *    the communicator's timeout (ddp_init_options.timeout_s, DDP_TIMEOUT_S,
 *    default 1800 s) or the call's own (ddp_collective_options.timeout_s).
 *    Past it the call returns DDP_ERR_TIMEOUT naming the ranks that did not
 *    join, the communicator is broken (every later call, and every async
 *    request still queued, returns DDP_ERR_TIMEOUT at once) and its peers
 *    are told, so they fail too instead of waiting. After DDP_STALL_WARN_S
 *    seconds (default 60) a waiting rank logs which ranks have not joined
 *    and what each of them last called. The buffers of a call that timed
 *    out may still be written by MPI until the process ends (an MPI
 *    collective cannot be cancelled): keep them alive, and end the job, as
 *    PyTorch's watchdog does. ddp_finalize on a broken communicator returns
 *    in bounded time.
 *  - Dead peers: a call waiting on a peer that has died fails before the
 *    timeout, as a timeout would (DDP_ERR_TIMEOUT, the communicator broken,
 *    the peers told), naming the rank, its pid and host and what it last
 *    called: on the same host at once (its process is gone), on another
 *    host once it has left heartbeats unanswered for DDP_PEER_DEAD_S
 *    seconds (default 10; a peer stopped that long on the same host counts
 *    too). A peer that is slow or computing keeps answering and is waited
 *    for (docs/multinode.md, Dead peers).
 *  - GPU buffers (DDP_DEVICE_CUDA): a list is all host memory or all
 *    device memory of the communicator's GPU (ddp_device); anything else is
 *    DDP_ERR_INVALID_ARGUMENT. A device call is ordered on the CUDA stream
 *    of its options (ddp_collective_options.cuda_stream), as NCCL's and
 *    PyTorch's are. With the `nccl` backend NCCL moves the bytes: the call
 *    returns once the work is enqueued, without waiting for the GPU
 *    (floating MIN and MAX excepted: NCCL does not promise to propagate
 *    NaN, so those are staged as with `mpi`), and a
 *    watchdog thread holds that work to the call's timeout (past it, or on
 *    an NCCL error, it aborts the NCCL communicator and the communicator is
 *    broken: later calls return DDP_ERR_TIMEOUT or DDP_ERR_BACKEND with
 *    NCCL's own message). With the `mpi` backend the buffers are staged
 *    through pinned host memory (MPI is never handed device memory) and the
 *    call returns when the result is back in the device buffers.
 *    ddp_check_replicas on device buffers always reads them on the host. A
 *    stream that is being captured into a CUDA graph is refused
 *    (DDP_ERR_UNSUPPORTED): capture is not supported in this version.
 */
#ifndef DDP_DDP_H
#define DDP_DDP_H

#include <stddef.h>
#include <stdint.h>

#define DDP_VERSION_MAJOR 1
#define DDP_VERSION_MINOR 3
#define DDP_VERSION_PATCH 0
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define DDP_VERSION_NUMBER \
    (DDP_VERSION_MAJOR * 10000 + DDP_VERSION_MINOR * 100 + DDP_VERSION_PATCH)

#if defined(_WIN32)
#  if defined(DDP_BUILDING_LIBRARY)
#    define DDP_API __declspec(dllexport)
#  else
#    define DDP_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define DDP_API __attribute__((visibility("default")))
#else
#  define DDP_API
#endif

/* Enums are int-sized in C. In C++ they get the fixed underlying type
 * int32_t, so that any value a newer library (or a buggy caller) passes is
 * still a valid value of the type: switching over an unknown ddp_status is
 * then defined behaviour. */
#ifdef __cplusplus
#  define DDP_ENUM_BASE : int32_t
#else
#  define DDP_ENUM_BASE
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                   */
/* ------------------------------------------------------------------------ */

/** What a call did. Values never change once released. */
typedef enum ddp_status DDP_ENUM_BASE {
    DDP_OK = 0,
    /** An argument is out of its documented range (the message names it). */
    DDP_ERR_INVALID_ARGUMENT = 1,
    /** Ranks passed different lists, ops or roots to the same collective. */
    DDP_ERR_MISMATCH = 2,
    /** The request is valid but this build or backend cannot do it. */
    DDP_ERR_UNSUPPORTED = 3,
    /** The communicator was finalized (or the handle is not a ddp_comm). */
    DDP_ERR_NOT_INITIALIZED = 4,
    /** ddp_init was called while a world communicator is still live. */
    DDP_ERR_ALREADY_INITIALIZED = 5,
    /** Peers did not arrive within the timeout; the communicator is broken. */
    DDP_ERR_TIMEOUT = 6,
    /** The backend library (MPI) reported an error; the message quotes it. */
    DDP_ERR_BACKEND = 7,
    /** Memory for a fusion buffer or a request could not be allocated. */
    DDP_ERR_OUT_OF_MEMORY = 8,
    /** An output array is smaller than the result; see ddp_shard_indices. */
    DDP_ERR_BUFFER_TOO_SMALL = 9,
    /** A bug in libddp; please report the message. */
    DDP_ERR_INTERNAL = 10
} ddp_status;

/** The enum's name as a static string ("DDP_ERR_MISMATCH"); never NULL. */
DDP_API const char* ddp_status_name(ddp_status status);

/** The calling thread's last error message; "" when none. Never NULL. The
 *  pointer stays valid until the next libddp call on this thread. */
DDP_API const char* ddp_last_error_message(void);

/** The run-time library version as DDP_VERSION_NUMBER would compute it. */
DDP_API uint32_t ddp_version(void);

/** The run-time library version as "major.minor.patch". */
DDP_API const char* ddp_version_string(void);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

/** Element types. Each value is (DLPack type code << 8) | bits, so a DLPack
 *  DLDataType {code, bits, lanes=1} maps to exactly one ddp_dtype. */
typedef enum ddp_dtype DDP_ENUM_BASE {
    DDP_DTYPE_I8 = 0x0008,   /* kDLInt,    8 bits */
    DDP_DTYPE_I32 = 0x0020,  /* kDLInt,   32 bits */
    DDP_DTYPE_I64 = 0x0040,  /* kDLInt,   64 bits */
    DDP_DTYPE_U8 = 0x0108,   /* kDLUInt,   8 bits */
    DDP_DTYPE_F16 = 0x0210,  /* kDLFloat, 16 bits (IEEE binary16) */
    DDP_DTYPE_F32 = 0x0220,  /* kDLFloat, 32 bits */
    DDP_DTYPE_F64 = 0x0240,  /* kDLFloat, 64 bits */
    DDP_DTYPE_BF16 = 0x0410  /* kDLBfloat, 16 bits */
} ddp_dtype;

/** Where a buffer lives; values equal DLPack's DLDeviceType. */
typedef enum ddp_device_type DDP_ENUM_BASE {
    DDP_DEVICE_CPU = 1,        /* kDLCPU */
    DDP_DEVICE_CUDA = 2,       /* kDLCUDA: memory of the communicator's GPU */
    DDP_DEVICE_CUDA_HOST = 3,  /* kDLCUDAHost: pinned host memory, used as CPU */
    DDP_DEVICE_ROCM = 10,      /* kDLROCM: not supported */
    DDP_DEVICE_CUDA_MANAGED = 13 /* kDLCUDAManaged: not supported */
} ddp_device_type;

/**
 * A contiguous buffer of `count` elements of `dtype`. `data` may be NULL
 * only when `count` is 0. `device_id` is ignored for host buffers; for
 * DDP_DEVICE_CUDA it must be the communicator's device (ddp_device).
 *
 * Lists of tensors are passed as arrays, so this layout is final: 32 bytes
 * on every 64-bit platform, no padding, the same in every language.
 *  - The enum-valued fields are int32_t (holding ddp_dtype and
 *    ddp_device_type values) because a C enum's size is the compiler's
 *    choice, and so that an invalid value can be checked before it is
 *    trusted.
 *  - `flags` is reserved for per-tensor properties of later versions; it
 *    must be 0 (DDP_ERR_INVALID_ARGUMENT otherwise), so that an older
 *    library refuses a flag it does not know instead of ignoring it.
 *  - There is no shape: every collective is element-wise over contiguous
 *    memory, so a shape would only be carried and checked. Frameworks keep
 *    their shapes (DLPack carries them); bindings flatten.
 *
 * Within one call, tensors that the call writes must not overlap (the same
 * buffer twice would be reduced twice): such a list is
 * DDP_ERR_INVALID_ARGUMENT naming both tensors. Read-only calls
 * (ddp_check_replicas) accept overlapping tensors.
 */
typedef struct ddp_tensor {
    void* data;
    int64_t count;
    int32_t dtype;       /**< a ddp_dtype */
    int32_t device_type; /**< a ddp_device_type */
    int32_t device_id;
    uint32_t flags;      /**< reserved: 0 */
} ddp_tensor;

/** Reduction operations. AVG is SUM divided by the world size, defined for
 *  floating dtypes only. Integer SUM and PROD wrap around on overflow.
 *  f16 and bf16 reduce pairwise in single precision, rounding to nearest
 *  even after each step. MIN and MAX propagate NaN, as PyTorch does: an
 *  element that is NaN on any rank is NaN in the result, whichever rank
 *  holds it, whatever the dtype or fusion. */
typedef enum ddp_op DDP_ENUM_BASE {
    DDP_OP_SUM = 0,
    DDP_OP_AVG = 1,
    DDP_OP_MIN = 2,
    DDP_OP_MAX = 3,
    DDP_OP_PROD = 4
} ddp_op;

/* ------------------------------------------------------------------------ */
/* Process groups                                                            */
/* ------------------------------------------------------------------------ */

/** A process group: the world (ddp_init) or a sub-communicator
 *  (ddp_comm_split). Opaque; always used through a pointer. */
typedef struct ddp_comm ddp_comm;

/** Which transport carries the data. */
typedef enum ddp_backend DDP_ENUM_BASE {
    /** DDP_BACKEND from the environment, else `mpi` when the process was
     *  started by an MPI launcher (or MPI is already initialized), else `self`. */
    DDP_BACKEND_AUTO = 0,
    /** One process, rank 0 of 1, no launcher; collectives leave data as is. */
    DDP_BACKEND_SELF = 1,
    /** Open MPI (or any MPI-3 library) on CPU buffers. */
    DDP_BACKEND_MPI = 2,
    /** NCCL moves device buffers between the ranks' GPUs; agreement,
     *  timeouts and host buffers go through MPI (or `self` for one process
     *  started without a launcher). libddp loads NCCL at run time
     *  (dlopen of libnccl.so.2, or the file DDP_NCCL_LIBRARY names, e.g.
     *  the one in the nvidia-nccl-cu13 wheel), so a machine without NCCL
     *  runs every CPU path of the same binary. */
    DDP_BACKEND_NCCL = 3
} ddp_backend;

/** ddp_init_options.mpi_comm_fortran when no communicator is adopted (an
 *  int64_t; a plain integer literal so that generated bindings read it). */
#define DDP_NO_MPI_COMM (-1)

typedef struct ddp_init_options {
    uint32_t struct_size;      /**< set by ddp_init_options_init */
    ddp_backend backend;       /**< default DDP_BACKEND_AUTO */
    /** An existing MPI communicator's Fortran handle (MPI_Comm_c2f, or
     *  mpi4py's comm.py2f()) to adopt instead of MPI_COMM_WORLD. libddp
     *  duplicates it, so its own traffic never meets the caller's. The
     *  caller keeps MPI initialized until after ddp_finalize.
     *  Default DDP_NO_MPI_COMM. */
    int64_t mpi_comm_fortran;
    /** Seconds a collective waits for every rank to arrive before it returns
     *  DDP_ERR_TIMEOUT. 0 means DDP_TIMEOUT_S from the environment, else
     *  1800: PyTorch's default, long enough for a slow first step (data
     *  loading, compilation) on every rank, short enough that a dead job
     *  ends within the hour. Any finite value > 0 is accepted; very large
     *  ones mean "wait for ever". */
    double timeout_s;
    /** Seconds past a collective's deadline that its thread may stay inside
     *  MPI (or a log callback) before the hang watchdog aborts the process
     *  with one line naming the call, so that the launcher ends the job (a
     *  thread inside MPI never sees its deadline; docs/multinode.md). 0 means
     *  DDP_HANG_WATCHDOG_S from the environment (0 or "off" there: no
     *  watchdog), else 60; a negative value turns the watchdog off. Since 1.2. */
    double hang_watchdog_s;
} ddp_init_options;

/** Fills the first `struct_size` bytes of `opts` with the defaults above
 *  and sets opts->struct_size. Pass sizeof(ddp_init_options) as your
 *  program sees it. DDP_ERR_INVALID_ARGUMENT when `opts` is NULL or
 *  `struct_size` is smaller than the first released layout or larger than
 *  this library's (a program built against a newer header). */
DDP_API ddp_status ddp_init_options_init(ddp_init_options* opts, uint32_t struct_size);

/**
 * Starts the backend and returns the world communicator in `*world`.
 *
 * With the `mpi` backend, MPI is initialized (MPI_THREAD_MULTIPLE requested)
 * unless it already is. Every rank learns its node-local rank by splitting
 * the communicator by shared memory. When libddp was built with CUDA and the
 * node has GPUs, rank `local_rank % gpu_count` is assigned to each process
 * and made current (cudaSetDevice); otherwise ddp_device reports -1.
 *
 * Collective: every rank of the communicator must call it.
 *
 * Returns DDP_ERR_INVALID_ARGUMENT (NULL `world`, a bad options field, an
 * unknown DDP_BACKEND value), DDP_ERR_ALREADY_INITIALIZED (a world from an
 * earlier ddp_init is still live, or MPI was already finalized),
 * DDP_ERR_UNSUPPORTED (backend not built in; a launcher started several
 * ranks but libddp was built without MPI; `nccl` where it cannot work: the
 * message says which of libddp built without CUDA, no CUDA driver, no GPU,
 * NCCL not found or too old, or two ranks on one GPU), DDP_ERR_TIMEOUT (the
 * NCCL communicator was not set up within the timeout), DDP_ERR_BACKEND.
 */
DDP_API ddp_status ddp_init(const ddp_init_options* opts, ddp_comm** world);

/**
 * Releases the communicator. Finalizes MPI only if ddp_init initialized it.
 * Idempotent: a second call on the same handle returns DDP_OK. The handle's
 * few bytes stay allocated so that any later call with it returns
 * DDP_ERR_NOT_INITIALIZED rather than touching freed memory. Waits for the
 * communicator's async requests to finish first.
 * Collective when MPI is finalized (MPI_Finalize is).
 * Sub-communicators still live (ddp_comm_split) are freed with it, once
 * every rank has reached ddp_finalize; their handles then return
 * DDP_ERR_NOT_INITIALIZED.
 * Returns DDP_ERR_INVALID_ARGUMENT for NULL or a sub-communicator (free
 * those with ddp_comm_free), DDP_ERR_BACKEND.
 */
DDP_API ddp_status ddp_finalize(ddp_comm* world);

/* Queries. Each returns DDP_ERR_INVALID_ARGUMENT for a NULL argument and
 * DDP_ERR_NOT_INITIALIZED for a finalized communicator. Local. */

/** This process's rank in the communicator, 0-based. */
DDP_API ddp_status ddp_rank(const ddp_comm* comm, int32_t* rank);
/** The number of ranks. */
DDP_API ddp_status ddp_size(const ddp_comm* comm, int32_t* size);
/** This process's rank among the ranks on its node, 0-based. */
DDP_API ddp_status ddp_local_rank(const ddp_comm* comm, int32_t* local_rank);
/** The number of ranks on this process's node. */
DDP_API ddp_status ddp_local_size(const ddp_comm* comm, int32_t* local_size);
/** The CUDA device assigned to this rank, or -1 when none is. */
DDP_API ddp_status ddp_device(const ddp_comm* comm, int32_t* device_id);
/** "self", "mpi" or "nccl": a static string. */
DDP_API ddp_status ddp_backend_name(const ddp_comm* comm, const char** name);

/* ------------------------------------------------------------------------ */
/* Collectives on tensor lists                                               */
/* ------------------------------------------------------------------------ */

/** Per-call settings of every collective. */
typedef struct ddp_collective_options {
    uint32_t struct_size; /**< set by ddp_collective_options_init */
    /** Largest fusion bucket in bytes. Tensors under 64 KiB (or under this
     *  size, if smaller) are packed, in list order and by dtype, into
     *  buckets of at most this size and reduced one bucket at a time (in
     *  place, with no copy, when a bucket's tensors already lie back to back
     *  in memory); larger tensors are reduced in place with no copy. 0 means
     *  DDP_FUSION_BYTES from the environment when set, else a size chosen
     *  by measurement for each list during its first calls (docs/buckets.md;
     *  DDP_AUTOTUNE=0: 1 MiB). -1 turns fusion off: every tensor is
     *  reduced in place by itself. Part of agreement: every rank must use
     *  the same value. Used by allreduce, broadcast, reduce and
     *  sync_optimizer_state. */
    int64_t fusion_bytes;
    /** Seconds this call may take before DDP_ERR_TIMEOUT; 0 means the
     *  communicator's timeout. Local: ranks may use different values. */
    double timeout_s;
    /** The cudaStream_t that a call on device buffers is ordered on. NULL
     *  (the default) is CUDA's legacy default stream;
     *  (void*)DDP_CUDA_STREAM_PER_THREAD is the per-thread default stream.
     *  Ignored for host buffers. Local. (Added in 1.1.) */
    void* cuda_stream;
    /** Names of the call's tensors, for the timeline (ddp_timeline_start):
     *  NULL (the default) or an array of `n` strings, one per tensor, any
     *  of them NULL. Read only while a timeline is recording; never part of
     *  agreement. Local. (Added in 1.2.) */
    const char* const* names;
    /** Nonzero marks a call that a language binding makes for its own
     *  purposes (checking that the ranks' arguments agree, explaining a
     *  mismatch), not one its user asked for. Messages, stall reports, the
     *  hang watchdog and the flight recorder number the user's calls 1, 2,
     *  3, ... without these, so that the user's 50th call is "allreduce
     *  #50"; a marked call is named "the binding's own allreduce after call
     *  #50", and its flight recorder entry says "binding": true. Every rank
     *  must mark the same calls. 0 (the default) for every call a program
     *  makes itself. Local. (Added in 1.3.) */
    int32_t for_binding;
} ddp_collective_options;

/** The value of cudaStreamPerThread, for ddp_collective_options.cuda_stream
 *  in programs that do not include the CUDA headers. */
#define DDP_CUDA_STREAM_PER_THREAD 2

/** Fills the first `struct_size` bytes of `opts` with the defaults (as
 *  ddp_init_options_init does). */
DDP_API ddp_status ddp_collective_options_init(ddp_collective_options* opts,
                                               uint32_t struct_size);

/**
 * Reduces `n` tensors in place across all ranks with `op`: afterwards every
 * rank holds the same result in every tensor.
 *
 * `tensors` may be NULL only when `n` is 0; the list may be empty and
 * tensors may have count 0. Integer dtypes with DDP_OP_AVG are rejected.
 * Collective. Returns DDP_ERR_INVALID_ARGUMENT (naming the tensor index and
 * field), DDP_ERR_UNSUPPORTED (device buffers on a rank without a usable
 * GPU; the message says why), DDP_ERR_MISMATCH (ranks
 * disagree; the message names both ranks and the first differing tensor),
 * DDP_ERR_NOT_INITIALIZED, DDP_ERR_TIMEOUT, DDP_ERR_BACKEND,
 * DDP_ERR_OUT_OF_MEMORY.
 */
DDP_API ddp_status ddp_allreduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors,
                                             int64_t n, ddp_op op,
                                             const ddp_collective_options* opts);

/** An operation in flight. Opaque. */
typedef struct ddp_request ddp_request;

/**
 * Starts ddp_allreduce_tensor_list and returns at once; a background thread
 * of the communicator carries it out while the caller computes. The
 * `tensors` array itself is copied and may be freed on return; the buffers
 * it points to must stay alive and untouched until the request completes.
 * Requests on the host complete in the order they were started, and a
 * blocking collective on the same communicator waits for those before it
 * (requests on the GPU complete as the GPU finishes them; see below). Once the
 * communicator is broken (a timeout), queued requests complete at once
 * with DDP_ERR_TIMEOUT.
 * Argument errors are reported here; errors of the operation itself
 * (mismatch, timeout, backend) are reported by ddp_request_wait/test.
 * Needs MPI_THREAD_SERIALIZED or better when the backend is MPI
 * (DDP_ERR_UNSUPPORTED otherwise).
 * On device buffers with the `nccl` backend the work is enqueued on the
 * options' stream before this returns, and the request completes when the
 * GPU has finished it; staged through MPI, the background thread starts
 * once the stream has reached the call.
 */
DDP_API ddp_status ddp_allreduce_tensor_list_async(ddp_comm* comm, const ddp_tensor* tensors,
                                                   int64_t n, ddp_op op,
                                                   const ddp_collective_options* opts,
                                                   ddp_request** request);

/** Blocks until the request completes and returns its status (its message
 *  in ddp_last_error_message on this thread). Waiting again returns the same
 *  status. The request still needs ddp_request_free. */
DDP_API ddp_status ddp_request_wait(ddp_request* request);

/** Sets `*done` to 1 when the request has completed and returns its status,
 *  else sets 0 and returns DDP_OK. Never blocks. */
DDP_API ddp_status ddp_request_test(ddp_request* request, int32_t* done);

/** Waits for the request if it is still running, then frees it. NULL is a
 *  no-op returning DDP_OK. Returns the request's status. */
DDP_API ddp_status ddp_request_free(ddp_request* request);

/**
 * Copies root's tensors into every other rank's tensors (parameters at the
 * start of training). Small tensors travel fused, as in allreduce.
 * Collective. Returns DDP_ERR_INVALID_ARGUMENT (root out of [0, size), a
 * bad tensor), DDP_ERR_MISMATCH, and the errors of allreduce.
 */
DDP_API ddp_status ddp_broadcast_tensor_list(ddp_comm* comm, const ddp_tensor* tensors,
                                             int64_t n, int32_t root,
                                             const ddp_collective_options* opts);

/**
 * Reduces every rank's tensors into root's tensors with `op`; other ranks'
 * tensors are left unchanged. Errors as ddp_broadcast_tensor_list plus the
 * op checks of allreduce.
 */
DDP_API ddp_status ddp_reduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors,
                                          int64_t n, ddp_op op, int32_t root,
                                          const ddp_collective_options* opts);

/**
 * Gathers every rank's `inputs` into every rank's `outputs` (the parameter
 * half of ZeRO and FSDP): outputs[i] holds inputs[i] of rank 0, then of
 * rank 1, and so on, back to back, so outputs[i] has inputs[i]'s dtype and
 * memory and `size` times its count. inputs[i] may be exactly this rank's
 * block of outputs[i] (at outputs[i].data + rank × inputs[i]'s bytes: in
 * place); any other overlap between the lists is refused, as is an
 * outputs[i] of another count or dtype. Small tensors travel fused, as in
 * allreduce. `outputs` is read as an array of `n` tensors.
 * Collective (since 1.3). Returns DDP_ERR_INVALID_ARGUMENT (naming the
 * tensor and field), DDP_ERR_MISMATCH (ranks pass different input lists;
 * the message names both ranks and the first differing tensor), and the
 * errors of allreduce.
 */
DDP_API ddp_status ddp_allgather_tensor_list(ddp_comm* comm, const ddp_tensor* inputs,
                                             const ddp_tensor* outputs, int64_t n,
                                             const ddp_collective_options* opts);

/** ddp_allgather_tensor_list started as ddp_allreduce_tensor_list_async
 *  starts an allreduce (since 1.3): both arrays are copied, the buffers
 *  must stay alive until the request completes. */
DDP_API ddp_status ddp_allgather_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                   const ddp_tensor* outputs, int64_t n,
                                                   const ddp_collective_options* opts,
                                                   ddp_request** request);

/**
 * Reduces every rank's `inputs` with `op` and leaves this rank's equal
 * shard of each result in its `outputs` (the gradient half of ZeRO and
 * FSDP): with c = inputs[i].count / size, outputs[i] (c elements, inputs[i]'s
 * dtype and memory) gets elements [rank × c, (rank + 1) × c) of the
 * reduction of inputs[i]. Shards are equal: an inputs[i].count that is not a
 * multiple of the communicator's size is DDP_ERR_INVALID_ARGUMENT naming the
 * tensor (pad it to the next multiple; the message says to what), and a
 * shard above 2^30 - 1 elements is DDP_ERR_UNSUPPORTED. Inputs are only
 * read; the lists must not overlap. AVG and integer rules as allreduce's.
 * Collective (since 1.3). Errors as ddp_allgather_tensor_list.
 */
DDP_API ddp_status ddp_reduce_scatter_tensor_list(ddp_comm* comm, const ddp_tensor* inputs,
                                                  const ddp_tensor* outputs, int64_t n, ddp_op op,
                                                  const ddp_collective_options* opts);

/** ddp_reduce_scatter_tensor_list started as an async request (since 1.3),
 *  as ddp_allgather_tensor_list_async. */
DDP_API ddp_status ddp_reduce_scatter_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                        const ddp_tensor* outputs, int64_t n, ddp_op op,
                                                        const ddp_collective_options* opts,
                                                        ddp_request** request);

/**
 * Exchanges blocks between every pair of ranks (the token exchange of
 * mixture-of-experts layers; torch's all_to_all_single, MPI_Alltoall): with
 * c = inputs[i].count / size, block j of inputs[i] (elements [j × c,
 * (j + 1) × c)) goes to rank j, and block r of outputs[i] receives rank r's
 * block for this rank, in rank order. outputs[i] has inputs[i]'s dtype,
 * memory and count. Blocks are equal: an inputs[i].count that is not a
 * multiple of the communicator's size is DDP_ERR_INVALID_ARGUMENT naming
 * the tensor, and a block above 2^30 - 1 elements is DDP_ERR_UNSUPPORTED.
 * Inputs are only read; the lists must not overlap. Small tensors travel
 * fused, as in allreduce. Collective (since 1.3). Errors as
 * ddp_allgather_tensor_list.
 */
DDP_API ddp_status ddp_alltoall_tensor_list(ddp_comm* comm, const ddp_tensor* inputs,
                                            const ddp_tensor* outputs, int64_t n,
                                            const ddp_collective_options* opts);

/** ddp_alltoall_tensor_list started as an async request (since 1.3), as
 *  ddp_allgather_tensor_list_async. */
DDP_API ddp_status ddp_alltoall_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                  const ddp_tensor* outputs, int64_t n,
                                                  const ddp_collective_options* opts,
                                                  ddp_request** request);

/**
 * Makes every rank's optimizer state equal root's: `n` leaf tensors (moment
 * estimates) and `n_scalars` doubles (step counts, learning rates).
 * First checks that every rank holds the same structure (leaf count, each
 * leaf's dtype and count, scalar count); on any difference every rank
 * returns DDP_ERR_MISMATCH naming the first differing leaf and both ranks,
 * and nothing is overwritten. `scalars` may be NULL only when `n_scalars`
 * is 0. Collective.
 */
DDP_API ddp_status ddp_sync_optimizer_state(ddp_comm* comm, const ddp_tensor* leaves,
                                            int64_t n, double* scalars, int64_t n_scalars,
                                            int32_t root, const ddp_collective_options* opts);

/**
 * Sets `*identical` to 1 when every tensor holds the same bytes on every
 * rank, else 0 and ddp_last_error_message() names the first differing
 * tensor and two ranks that differ (the call still returns DDP_OK).
 * Compares 64-bit hashes of each tensor's bytes; a difference is reported
 * on every rank. Collective; the list structure is checked first, as for
 * allreduce.
 */
DDP_API ddp_status ddp_check_replicas(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                      const ddp_collective_options* opts, int32_t* identical);

/** Returns when every rank has called it. Collective. */
DDP_API ddp_status ddp_barrier(ddp_comm* comm, const ddp_collective_options* opts);

/* ------------------------------------------------------------------------ */
/* Sub-communicators (since 1.3)                                             */
/* ------------------------------------------------------------------------ */

/** ddp_comm_split's color for a rank that joins no sub-communicator (as
 *  MPI_UNDEFINED): its *sub is set to NULL. */
#define DDP_COLOR_UNDEFINED (-1)

/** Settings of a new sub-communicator. */
typedef struct ddp_split_options {
    uint32_t struct_size; /**< set by ddp_split_options_init */
    /** The sub-communicator's timeout for its collectives (as
     *  ddp_init_options.timeout_s is the world's); 0 (the default) means the
     *  parent's. The split itself is a collective on the parent and is held
     *  to the parent's timeout. Local: ranks may use different values. */
    double timeout_s;
} ddp_split_options;

/** Fills the first `struct_size` bytes of `opts` with the defaults (as
 *  ddp_init_options_init does). */
DDP_API ddp_status ddp_split_options_init(ddp_split_options* opts, uint32_t struct_size);

/**
 * Splits `comm` into sub-communicators, as MPI_Comm_split: the ranks that
 * pass the same `color` (>= 0) form one, ranked by `key`, ties broken by
 * their rank in `comm`; a rank passing DDP_COLOR_UNDEFINED joins none and
 * gets *sub = NULL. With the `nccl` backend the sub-communicator's NCCL
 * communicator comes from ncclCommSplit (NCCL 2.18.1 or newer, else
 * DDP_ERR_UNSUPPORTED).
 *
 * A sub-communicator takes every call a world takes (collectives, async
 * requests, reducers, timeline, flight recorder, ddp_comm_abort, queries;
 * ddp_local_rank/ddp_local_size count its ranks on this node) and has its
 * own agreement, sequence numbers, deadlines, stall reports and breakage:
 * a timeout in it breaks it alone, and its messages name it
 * ("sub-communicator color 1 (comm_split #3 of world): ..."), while its
 * parent and other sub-communicators go on working. It is independent of
 * its parent once made: a broken parent leaves it working (but refuses
 * further splits), and it may outlive a parent sub-communicator that is
 * freed. Different communicators may be used from different threads at
 * the same time when MPI runs at MPI_THREAD_MULTIPLE (as libddp asks for).
 *
 * Collective on `comm`, in order with its other collectives: agreement
 * first (a rank whose arguments are invalid makes its peers fail at once
 * with DDP_ERR_MISMATCH naming it), then the split, held to `comm`'s
 * timeout (MPI_Comm_split itself blocks; a rank stuck in it past the
 * deadline is ended by the hang watchdog). Free it with ddp_comm_free;
 * ddp_finalize of the world frees those still live.
 * Returns DDP_ERR_INVALID_ARGUMENT (NULL `sub`, a negative color other than
 * DDP_COLOR_UNDEFINED, a bad options field), DDP_ERR_MISMATCH,
 * DDP_ERR_NOT_INITIALIZED, DDP_ERR_TIMEOUT, DDP_ERR_UNSUPPORTED,
 * DDP_ERR_BACKEND (with nccl, a failed ncclCommSplit also breaks `comm`).
 */
DDP_API ddp_status ddp_comm_split(ddp_comm* comm, int32_t color, int32_t key, const ddp_split_options* opts,
                                  ddp_comm** sub);

/**
 * The ranks of `comm` that share this rank's node (shared memory), ranked
 * as in `comm`: ddp_comm_split with the node as color, for hierarchical
 * work (reduce within the node, then across nodes). Every rank gets one.
 * Collective on `comm`; errors as ddp_comm_split.
 */
DDP_API ddp_status ddp_comm_split_node(ddp_comm* comm, const ddp_split_options* opts, ddp_comm** node);

/**
 * Releases a sub-communicator, as ddp_finalize releases the world (it
 * waits for its async requests, returns in bounded time when peers are
 * gone, is idempotent, and a later call with the handle returns
 * DDP_ERR_NOT_INITIALIZED) but never finalizes MPI. Collective over the
 * sub-communicator. NULL is a no-op returning DDP_OK (the handle of a rank
 * that passed DDP_COLOR_UNDEFINED). DDP_ERR_INVALID_ARGUMENT for the world
 * (end it with ddp_finalize) or while another thread is inside a call on it.
 */
DDP_API ddp_status ddp_comm_free(ddp_comm* sub);

/* ------------------------------------------------------------------------ */
/* Timeline and flight recorder                                              */
/* ------------------------------------------------------------------------ */

/**
 * Starts recording a timeline: every rank writes its own Chrome trace-event
 * JSON file (Perfetto and chrome://tracing open it) with one event per
 * phase of every collective (agreement, each bucket's pack, transfer and
 * unpack, device staging, waits, async queueing, reducer marks and
 * buckets), their sequence numbers, bytes, the plane that ran them and the
 * tensor names of ddp_collective_options.names.
 *
 * Each rank's file name comes from `path`: "%r" in it is replaced by the
 * rank ("run/t.%r.json" -> run/t.0.json); otherwise ".rankR" goes before a
 * final ".json" ("t.json" -> t.rank0.json), or ".rankR.json" is appended.
 * DDP_TIMELINE=path in the environment of every rank starts it in ddp_init.
 *
 * Collective (every rank calls it, in order with the collectives; it takes
 * a sequence number): the ranks exchange timestamps to measure their clock
 * offsets, which each file records for scripts/ddp-trace merge. Events are
 * buffered and written by a background thread; when it falls behind, events
 * are dropped and counted in the file. A file is complete once
 * ddp_timeline_stop or ddp_finalize has run. DDP_ERR_INVALID_ARGUMENT for a
 * NULL path, a file that cannot be created (every rank fails), or a
 * timeline already recording.
 */
DDP_API ddp_status ddp_timeline_start(ddp_comm* comm, const char* path);

/** Stops the timeline and completes this rank's file. Local. DDP_OK when
 *  none was recording. */
DDP_API ddp_status ddp_timeline_stop(ddp_comm* comm);

/**
 * Writes this rank's flight recorder: the last DDP_FLIGHT_RECORDER_SIZE
 * (default 64) collectives of the communicator, each with its kind,
 * sequence number, tensor count, bytes, op, root, description hash, the
 * times it was entered, agreed and finished (to a few milliseconds), and
 * its state. It is always
 * on, and every rank writes it by itself when the communicator breaks (a
 * timeout, an abort, a GPU failure; not on a mismatch, whose error says
 * what differed) into a file of its own, ddp-flight-recorder.rankR.json, in
 * DDP_FLIGHT_RECORDER_DIR or, when that is unset, in a folder of the user's
 * own per job under the temporary directory ($TMPDIR or /tmp, then
 * ddp-UID/JOB, mode 0700), and logs one line naming the file. `path` is the
 * file's name as given, every "%r" in it replaced by the rank (so
 * "fr.%r.json" gives each rank its own file); NULL means that automatic
 * file, which the log then names. scripts/ddp-trace explain reads every
 * rank's dump (or their folder) and says which rank is behind or which call
 * differs. Local; callable on a broken communicator.
 * DDP_ERR_INVALID_ARGUMENT when the file cannot be written.
 */
DDP_API ddp_status ddp_dump_flight_recorder(ddp_comm* comm, const char* path);

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

/** Levels; the numbers equal Python's logging levels. */
typedef enum ddp_log_level DDP_ENUM_BASE {
    DDP_LOG_DEBUG = 10,
    DDP_LOG_INFO = 20,
    DDP_LOG_WARN = 30,
    DDP_LOG_ERROR = 40
} ddp_log_level;

/** Receives each log line, prefix included, without a trailing newline. */
typedef void (*ddp_log_callback)(int32_t level, const char* line, void* user);

/**
 * Writes `[ddp RANK/SIZE HH:MM:SS.mmm] msg` (RANK 0-based, local time) to
 * stderr, or hands it to the callback, when `level` is at least the
 * threshold: DDP_LOG_LEVEL from the environment (debug, info, warn, error,
 * off, or a number), default info. Local: each rank logs its own line.
 * Returns DDP_ERR_INVALID_ARGUMENT for a NULL comm or msg or an unknown
 * level, DDP_ERR_NOT_INITIALIZED.
 */
DDP_API ddp_status ddp_log(const ddp_comm* comm, ddp_log_level level, const char* msg);

/** Routes every log line (libddp's own too) to `fn`, called with `user`;
 *  NULL restores stderr. Process-wide; thread-safe. Never fails. `fn` may
 *  be called from libddp's own threads, and must return normally: an
 *  exception or unwinding out of it ends the process (std::terminate). */
DDP_API ddp_status ddp_set_log_callback(ddp_log_callback fn, void* user);

/* ------------------------------------------------------------------------ */
/* Data set sharding (pure: no communicator, no init needed)                 */
/* ------------------------------------------------------------------------ */

typedef enum ddp_shard_strategy DDP_ENUM_BASE {
    /** Rank r takes items r, r + world, r + 2*world, ... of the order
     *  (torch.utils.data.DistributedSampler). */
    DDP_SHARD_STRIDED = 0,
    /** Rank r takes the r-th contiguous block of the order
     *  (FluxMPI's DistributedDataContainer). */
    DDP_SHARD_CONTIGUOUS = 1
} ddp_shard_strategy;

typedef struct ddp_shard_options {
    uint32_t struct_size;        /**< set by ddp_shard_options_init */
    int32_t shuffle;             /**< 1: permute by (seed, epoch); default 1 */
    uint64_t seed;               /**< default 0 */
    uint64_t epoch;              /**< default 0; change it every epoch */
    /** 1: drop the tail so every rank gets floor(n / world) items;
     *  0: pad by wrapping around to ceil(n / world) items. Default 0. */
    int32_t drop_last;
    ddp_shard_strategy strategy; /**< default DDP_SHARD_STRIDED */
} ddp_shard_options;

/** Fills the first `struct_size` bytes of `opts` with the defaults (as
 *  ddp_init_options_init does). */
DDP_API ddp_status ddp_shard_options_init(ddp_shard_options* opts, uint32_t struct_size);

/** The largest n_items a shuffled shard accepts. The permutation of step 2
 *  below is defined over the whole data set, so computing it needs 8 bytes
 *  per item; unshuffled shards need memory only for the shard itself and
 *  accept any n_items. */
#define DDP_SHARD_SHUFFLE_MAX_ITEMS 4294967296

/**
 * The number of items every rank gets: ceil(n_items / world), or
 * floor(n_items / world) with drop_last (0 when n_items is 0); exact for
 * every int64_t n_items.
 * DDP_ERR_INVALID_ARGUMENT for n_items < 0, world < 1, NULL count, or a
 * bad options field.
 */
DDP_API ddp_status ddp_shard_count(int64_t n_items, int32_t world,
                                   const ddp_shard_options* opts, int64_t* count);

/**
 * Writes the 0-based indices of the items rank `rank` owns into `out` and
 * their number into `*count`. Every rank gets the same count, so no rank
 * runs an extra batch. `out` may be NULL when the count is 0.
 * Returns DDP_ERR_BUFFER_TOO_SMALL (with `*count` set to the count needed)
 * when `capacity` is smaller than the count, DDP_ERR_INVALID_ARGUMENT for
 * rank outside [0, world), a shuffled n_items above
 * DDP_SHARD_SHUFFLE_MAX_ITEMS, and the cases of ddp_shard_count. Memory
 * use follows the shard (not the data set) unless shuffled.
 *
 * The order, exactly, so that every language gets the same shard:
 *  1. order = [0, 1, ..., n_items - 1].
 *  2. If shuffle: a SplitMix64 generator with 64-bit wrap-around state
 *       state = seed XOR (epoch * 0xD1B54A32D192ED03)
 *     whose next() is
 *       state += 0x9E3779B97F4A7C15; z = state;
 *       z = (z XOR (z >> 30)) * 0xBF58476D1CE4E5B9;
 *       z = (z XOR (z >> 27)) * 0x94D049BB133111EB;
 *       return z XOR (z >> 31);
 *     drives a Fisher-Yates shuffle: for i = n_items - 1 down to 1,
 *       j = next() mod (i + 1); swap order[i] and order[j].
 *  3. per_rank = the count above; total = per_rank * world. With drop_last
 *     order is cut to its first total items; without, it is extended to
 *     total items by repeating itself from its start (order[k mod n_items]).
 *  4. STRIDED: rank r takes order[r + k * world] for k = 0 .. per_rank-1.
 *     CONTIGUOUS: rank r takes order[r * per_rank + k].
 *
 * Test vectors (n_items = 10, world = 3, seed = 42, shuffle):
 *   order, epoch 0:      0 9 5 8 6 4 7 2 1 3
 *   order, epoch 1:      7 5 8 0 9 6 2 1 4 3
 *   strided, epoch 0:    rank 0: 0 8 7 3   rank 1: 9 6 2 0   rank 2: 5 4 1 9
 *   contiguous, rank 1:  6 4 7 2
 *   drop_last, strided, rank 2: 5 4 1
 *   without shuffle, strided, rank 1: 1 4 7 0
 */
DDP_API ddp_status ddp_shard_indices(int64_t n_items, int32_t rank, int32_t world,
                                     const ddp_shard_options* opts, int64_t* out,
                                     int64_t capacity, int64_t* count);

/* ------------------------------------------------------------------------ */
/* Experimental API                                                          */
/* ------------------------------------------------------------------------ */

/* What follows is declared only when DDP_EXPERIMENTAL_API is defined before
 * this header is included. These functions are exported, so they can ship
 * and be tried before they are frozen, but they are outside the ABI
 * promise: a minor release may change or remove them (the ABI baseline in
 * abi/ does not cover them), and bindings mark them experimental. */
#ifdef DDP_EXPERIMENTAL_API

/**
 * Starts `n` ranks of one group inside this process, for programs that
 * drive several replicas from threads (Conflux.jl's and FluxDistributed.jl's
 * way) without a launcher or MPI: `comms[i]` (an array of `n` the caller
 * owns) is rank i of n. Each rank is used by one thread at a time, as any
 * communicator; a collective completes once every rank has called it, and
 * everything that holds across processes holds between the threads:
 * agreement (a thread passing another list fails every rank with
 * DDP_ERR_MISMATCH naming it), a thread's invalid argument failing its
 * peers at once, deadlines naming the thread that never called, stall
 * reports, the flight recorder, the timeline, the reducer. Host memory
 * moves through the in-process plane: each rank reads its peers' buffers
 * where they lie. ddp_comm_split and ddp_comm_split_node of such ranks
 * make sub-groups of threads the same way (the node is every rank; a
 * split is refused inside ddp_group_start's group). End each rank with
 * ddp_finalize, which waits for no peer (one thread may end every rank in
 * turn) and frees its live sub-communicators: a peer's later call fails
 * naming the rank that finalized.
 *
 * `devices`: NULL for host memory only; else `n` CUDA device ids, and
 * rank i runs NCCL on GPU devices[i] (its own NCCL communicator, set up as
 * the nccl backend's, DDP_NCCL_LIBRARY included; ranks sharing a GPU need
 * NCCL 2.30 or newer with NCCL_MULTI_RANK_GPU_ENABLE=1): device buffers
 * move through NCCL, host buffers through the in-process plane.
 *
 * Without a launcher it starts no MPI and waits for no other process.
 * Under an MPI launcher (mpirun), `n` threads in each of P processes make
 * one group of P x n ranks: `comms[i]` is rank p x n + i, p being the
 * process's MPI rank. Every process must pass the same `n`, and MPI runs
 * at MPI_THREAD_MULTIPLE; a process whose arguments are refused starts MPI
 * all the same, so every process fails at once. Such a group's splits
 * make groups of processes x threads again: each color's ranks, ordered by
 * key, must be runs of one process's threads, equally many from each of its
 * processes (a split by thread number, by process, by node); other shapes
 * are refused on every rank (DDP_ERR_UNSUPPORTED). With `devices`, rank
 * p x n + i runs NCCL on its process's GPU devices[i], in one NCCL
 * communicator of P x n ranks (not yet run on GPUs: see docs/local.md).
 *
 * Returns DDP_ERR_INVALID_ARGUMENT (NULL `comms`; `n` outside 1..4096; a
 * negative device id; an options field, or `opts->backend` other than
 * DDP_BACKEND_AUTO, or an MPI communicator passed in opts: the group has
 * its own transport; a bad environment variable), DDP_ERR_UNSUPPORTED (no
 * GPU devices[i], no CUDA, no NCCL: on every rank, saying why),
 * DDP_ERR_BACKEND (NCCL's set-up failed).
 */
DDP_API ddp_status ddp_init_local(int32_t n, const int32_t* devices, const ddp_init_options* opts,
                                  ddp_comm** comms);

/**
 * Opens a group on the calling thread (NCCL's ncclGroupStart), so that one
 * thread can drive every rank of a group from ddp_init_local: until the
 * matching ddp_group_end, each blocking collective this thread calls
 * (allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall,
 * sync_optimizer_state, barrier) is checked and returns at once, and runs
 * on its communicator's background thread; ddp_group_end waits for them
 * all. Their buffers, and the names and scalars they point to, must stay
 * valid until then. ddp_check_replicas and the reducer's calls are refused
 * inside a group (DDP_ERR_INVALID_ARGUMENT). Groups nest: the outermost
 * end runs them. A call refused for its arguments inside a group returns
 * its error at once, and its peers' calls fail naming it as they run.
 * Local.
 */
DDP_API ddp_status ddp_group_start(void);

/**
 * Closes the group ddp_group_start opened; at the outermost, waits for every
 * collective started in it, and returns the first one's error (its message
 * says which call of the group it was) after all have ended.
 * DDP_ERR_INVALID_ARGUMENT when no group is open on this thread.
 */
DDP_API ddp_status ddp_group_end(void);

/**
 * Breaks the communicator on purpose and tells every peer, as a timeout
 * does: every later call on it returns DDP_ERR_TIMEOUT, here with `reason`
 * (may be NULL), on the peers naming this rank, instead of the peers
 * waiting for this rank until their timeout; a call already waiting (on
 * another thread: a watchdog may call this) ends too. For a rank that hit
 * an error of its own (a NaN loss, an out-of-memory) and is about to stop.
 * Local; never waits for peers (with the nccl backend it aborts NCCL, which
 * may take a moment). ddp_finalize is still needed.
 */
DDP_API ddp_status ddp_comm_abort(ddp_comm* comm, const char* reason);

/**
 * For bindings that check arguments of their own (an array's strides, a
 * dtype their language has but libddp lacks) before a collective: takes
 * part in `collective` as a rank whose arguments are invalid, as the C call
 * itself does when it refuses them, so that the peers' call returns
 * DDP_ERR_MISMATCH at once, naming this rank and `reason` (may be NULL;
 * the first 1024 bytes travel), instead of waiting for this rank.
 * `collective` is the call's name: "allreduce" (its async form too),
 * "broadcast", "reduce", "sync_optimizer_state", "check_replicas",
 * "barrier", "reducer_create", "allgather", "reduce_scatter", "comm_split",
 * "comm_split_node" or "alltoall" (the last five since 1.3). `opts` (may be NULL) gives the
 * timeout of that step, as for the call. Runs in call order, as a collective;
 * inside a group (ddp_group_start, experimental) it returns at once and
 * takes part as the group runs, ddp_group_end waiting for it. Returns
 * DDP_OK once this rank has taken part (the binding then reports its own
 * error); DDP_ERR_INVALID_ARGUMENT for a NULL comm or collective or an
 * unknown name (then it took no part), DDP_ERR_NOT_INITIALIZED.
 */
DDP_API ddp_status ddp_report_invalid_call(ddp_comm* comm, const char* collective, const char* reason,
                                           const ddp_collective_options* opts);

/**
 * Makes the cudaStream_t `cuda_stream` (NULL: the legacy default stream)
 * wait for `request` without blocking the host, where the request runs on
 * the GPU (device buffers with the `nccl` backend): work enqueued on that
 * stream afterwards starts once the request's reduction has finished. For
 * any other request it waits on the host, as ddp_request_wait. Returns the
 * request's status when it is known by then (an error reported by the
 * watchdog later shows in ddp_request_wait and on the communicator).
 */
DDP_API ddp_status ddp_request_stream_wait(ddp_request* request, void* cuda_stream);

/**
 * Persistent gradient buckets (PyTorch DDP's reducer): the way a training
 * loop should reduce its gradients every step.
 *
 * Register the gradient list once with ddp_reducer_create: libddp plans the
 * buckets once (in reverse list order, the order a backward pass produces
 * gradients; at most fusion_bytes each, by dtype), agrees on them with
 * every rank once, and owns one flat buffer per bucket. ddp_reducer_gradient
 * gives each gradient's storage inside its bucket: compute the gradient
 * there (or copy it there), so there is no packing or unpacking. During the
 * backward pass, mark each gradient ready in any order: the moment the last
 * gradient of a bucket is marked (and every earlier bucket has started) that
 * bucket's reduction starts, while the caller goes on computing. One
 * ddp_reducer_wait per step finishes them all.
 *
 * Guarantees as for the collectives: every step is held to the timeout, and
 * a rank that marks a different set of gradients than its peers makes every
 * rank's ddp_reducer_wait return DDP_ERR_MISMATCH naming the rank and the
 * gradient (that step's gradients are then undefined), never a hang.
 * Between the first mark of a step and its wait, the communicator runs no
 * other collective (DDP_ERR_INVALID_ARGUMENT if asked to).
 */
typedef struct ddp_reducer ddp_reducer;

/** Registers `n` gradients (their dtype and count; `data` is ignored and
 *  may be NULL) to be reduced with `op` every step. Collective. The
 *  buckets live in host memory: device gradients are DDP_ERR_UNSUPPORTED
 *  in this version (reduce them with ddp_allreduce_tensor_list).
 *  DDP_ERR_INVALID_ARGUMENT for a bad list or op, DDP_ERR_MISMATCH when
 *  ranks register different lists, and the errors of ddp_init's backend. */
DDP_API ddp_status ddp_reducer_create(ddp_comm* comm, const ddp_tensor* gradients, int64_t n, ddp_op op,
                                      const ddp_collective_options* opts, ddp_reducer** reducer);

/** Sets `*gradient` to gradient `index`'s storage in its bucket: a CPU
 *  tensor of the registered dtype and count, valid until ddp_reducer_free.
 *  After ddp_reducer_wait it holds the reduced gradient. Local. */
DDP_API ddp_status ddp_reducer_gradient(ddp_reducer* reducer, int64_t index, ddp_tensor* gradient);

/** Marks gradient `index` as computed for this step; starts its bucket's
 *  reduction when the bucket is complete. Local. DDP_ERR_INVALID_ARGUMENT
 *  for an index out of range or marked twice in one step. */
DDP_API ddp_status ddp_reducer_mark_ready(ddp_reducer* reducer, int64_t index);

/** Finishes the step: waits for every bucket (a bucket with unmarked
 *  gradients is started here so that no peer waits for ever), checks that
 *  every rank marked the same gradients, and makes the reducer ready for the
 *  next step. Collective. DDP_ERR_MISMATCH, DDP_ERR_TIMEOUT, DDP_ERR_BACKEND. */
DDP_API ddp_status ddp_reducer_wait(ddp_reducer* reducer);

/** Ends this rank's step as failed, for a binding whose caller passed a bad
 *  argument during the step (an index it checks itself) or a rank that
 *  cannot finish it: as ddp_reducer_wait (collective; unmarked buckets are
 *  started so that no peer waits for ever), except that every peer's
 *  ddp_reducer_wait returns DDP_ERR_MISMATCH naming this rank and `reason`
 *  (may be NULL; the first 1024 bytes travel). The step's gradients are
 *  undefined. Returns DDP_OK once this rank has taken part (the binding then
 *  reports its own error); DDP_ERR_INVALID_ARGUMENT when it could not (as
 *  ddp_reducer_wait refuses), DDP_ERR_NOT_INITIALIZED. */
DDP_API ddp_status ddp_reducer_fail_step(ddp_reducer* reducer, const char* reason);

/** Frees the reducer and its buckets; NULL is a no-op. A step in progress
 *  is finished first (as ddp_reducer_wait, so then it is collective). After
 *  a step that failed with reductions in flight, the buckets are kept until
 *  the communicator is finalized, since MPI may still write into them. */
DDP_API ddp_status ddp_reducer_free(ddp_reducer* reducer);

#endif /* DDP_EXPERIMENTAL_API */

#ifdef __cplusplus
}
#endif

#endif /* DDP_DDP_H */
