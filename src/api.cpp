// The C boundary: every exported function lives here. Each one checks its
// arguments, calls into the C++ internals, and turns any exception into a
// status code plus the thread-local message. Nothing else is exported.
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>

#include "agreement.hpp"
#include "collectives.hpp"
#include "communicator.hpp"
#include "ddp/ddp.h"
#include "env.hpp"
#include "error.hpp"
#include "gpu_device.hpp"
#include "log.hpp"
#include "nccl_backend.hpp"
#include "shard.hpp"
#include "validate.hpp"

// The handle behind ddp_comm*. It outlives finalize (see ddp_finalize's doc)
// so that a stale handle is recognised instead of dereferencing freed memory.
struct ddp_comm {
    static constexpr uint64_t expected_magic = 0x6464705f636f6d6dull;  // "ddp_comm"
    uint64_t magic = expected_magic;
    std::unique_ptr<ddp::Communicator> live;
};

struct ddp_request {
    std::shared_ptr<ddp::RequestState> state;
};

namespace {

using namespace ddp;

std::mutex init_mutex;
bool world_live = false;  // guarded by init_mutex

template <typename Body>
ddp_status guarded(Body body) noexcept {
    try {
        body();
        return DDP_OK;
    } catch (...) {
        std::string message;
        const ddp_status status = status_of_exception(std::current_exception(), message);
        set_last_error(std::move(message));
        return status;
    }
}

Communicator& live_comm(const ddp_comm* handle) {
    if (handle == nullptr) fail(DDP_ERR_INVALID_ARGUMENT, "comm is NULL (call ddp_init first)");
    if (handle->magic != ddp_comm::expected_magic)
        fail(DDP_ERR_INVALID_ARGUMENT, "comm does not point to a ddp_comm");
    if (!handle->live) fail(DDP_ERR_NOT_INITIALIZED, "comm was finalized");
    return *handle->live;
}

// Takes part in agreement for this rank's invalid call, so that its peers
// return DDP_ERR_MISMATCH at once instead of waiting for it. Errors of that
// step are dropped: the caller reports its own validation error.
void announce_invalid_call(Communicator& comm, CollectiveKind kind) {
    try {
        agree_on_invalid_call(comm.transport(), kind, comm.deadline());
    } catch (const Error&) {
    }
}

// Runs a collective in order on the caller's thread. When this rank's
// arguments fail `validate`, it still takes part in agreement, so its peers
// return DDP_ERR_MISMATCH at once instead of waiting for it; then it
// reports its own error.
template <typename Validate, typename Run>
void collective(ddp_comm* handle, CollectiveKind kind, Validate validate, Run run) {
    Communicator& comm = live_comm(handle);
    comm.run_in_order([&] {
        try {
            validate(comm);
        } catch (const Error&) {
            announce_invalid_call(comm, kind);
            throw;
        }
        run(comm);
    });
}

ddp_init_options default_init_options() {
    ddp_init_options opts{};
    opts.struct_size = sizeof opts;
    opts.backend = DDP_BACKEND_AUTO;
    opts.mpi_comm_fortran = DDP_NO_MPI_COMM;
    opts.timeout_s = 0;
    return opts;
}

ddp_collective_options default_collective_options() {
    ddp_collective_options opts{};
    opts.struct_size = sizeof opts;
    opts.fusion_bytes = 0;
    opts.timeout_s = 0;
    return opts;
}

ddp_shard_options default_shard_options() {
    ddp_shard_options opts{};
    opts.struct_size = sizeof opts;
    opts.shuffle = 1;
    opts.seed = 0;
    opts.epoch = 0;
    opts.drop_last = 0;
    opts.strategy = DDP_SHARD_STRIDED;
    return opts;
}

ddp_backend backend_from_environment() {
    auto text = env_string("DDP_BACKEND");
    if (!text || *text == "auto") return DDP_BACKEND_AUTO;
    if (*text == "self") return DDP_BACKEND_SELF;
    if (*text == "mpi") return DDP_BACKEND_MPI;
    if (*text == "nccl") return DDP_BACKEND_NCCL;
    fail(DDP_ERR_INVALID_ARGUMENT, "DDP_BACKEND='" + *text + "' is not auto, self, mpi or nccl");
}

ddp_backend chosen_backend(const ddp_init_options& opts) {
    if (opts.backend < DDP_BACKEND_AUTO || opts.backend > DDP_BACKEND_NCCL)
        fail(DDP_ERR_INVALID_ARGUMENT,
             "opts->backend " + std::to_string(opts.backend) + " is not a ddp_backend");
    if (opts.mpi_comm_fortran != DDP_NO_MPI_COMM) {
        if (opts.mpi_comm_fortran < 0)
            fail(DDP_ERR_INVALID_ARGUMENT, "opts->mpi_comm_fortran " + std::to_string(opts.mpi_comm_fortran) +
                                               " is neither a Fortran handle nor DDP_NO_MPI_COMM");
        if (opts.backend != DDP_BACKEND_AUTO && opts.backend != DDP_BACKEND_MPI)
            fail(DDP_ERR_INVALID_ARGUMENT, "opts->mpi_comm_fortran is set, which needs the mpi backend");
        return DDP_BACKEND_MPI;
    }
    ddp_backend backend = opts.backend != DDP_BACKEND_AUTO ? opts.backend : backend_from_environment();
    if (backend == DDP_BACKEND_AUTO) backend = mpi_launch_detected() ? DDP_BACKEND_MPI : DDP_BACKEND_SELF;
    return backend;
}

double chosen_timeout(const ddp_init_options& opts) {
    if (!(opts.timeout_s >= 0) || std::isinf(opts.timeout_s))
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->timeout_s must be a finite number >= 0 (0: default)");
    if (opts.timeout_s > 0) return opts.timeout_s;
    return env_seconds("DDP_TIMEOUT_S").value_or(1800.0);
}

std::unique_ptr<Transport> make_transport(ddp_backend backend, int64_t mpi_comm_fortran) {
    switch (backend) {
    case DDP_BACKEND_MPI: return make_mpi_transport(mpi_comm_fortran);
    case DDP_BACKEND_NCCL: return make_nccl_transport();
    default: return make_self_transport();
    }
}

template <typename T>
void set_output(T* out, T value, const char* name) {
    require_not_null(out, name) = value;
}

}  // namespace

extern "C" {

DDP_API const char* ddp_status_name(ddp_status status) {
    switch (status) {
    case DDP_OK: return "DDP_OK";
    case DDP_ERR_INVALID_ARGUMENT: return "DDP_ERR_INVALID_ARGUMENT";
    case DDP_ERR_MISMATCH: return "DDP_ERR_MISMATCH";
    case DDP_ERR_UNSUPPORTED: return "DDP_ERR_UNSUPPORTED";
    case DDP_ERR_NOT_INITIALIZED: return "DDP_ERR_NOT_INITIALIZED";
    case DDP_ERR_ALREADY_INITIALIZED: return "DDP_ERR_ALREADY_INITIALIZED";
    case DDP_ERR_TIMEOUT: return "DDP_ERR_TIMEOUT";
    case DDP_ERR_BACKEND: return "DDP_ERR_BACKEND";
    case DDP_ERR_OUT_OF_MEMORY: return "DDP_ERR_OUT_OF_MEMORY";
    case DDP_ERR_BUFFER_TOO_SMALL: return "DDP_ERR_BUFFER_TOO_SMALL";
    case DDP_ERR_INTERNAL: return "DDP_ERR_INTERNAL";
    }
    return "DDP_ERR_UNKNOWN_STATUS";
}

DDP_API const char* ddp_last_error_message(void) { return last_error(); }

DDP_API uint32_t ddp_version(void) { return DDP_VERSION_NUMBER; }

DDP_API const char* ddp_version_string(void) {
#define DDP_STRINGIFY_(x) #x
#define DDP_STRINGIFY(x) DDP_STRINGIFY_(x)
    return DDP_STRINGIFY(DDP_VERSION_MAJOR) "." DDP_STRINGIFY(DDP_VERSION_MINOR) "." DDP_STRINGIFY(
        DDP_VERSION_PATCH);
#undef DDP_STRINGIFY
#undef DDP_STRINGIFY_
}

DDP_API ddp_status ddp_init_options_init(ddp_init_options* opts, uint32_t struct_size) {
    return guarded([&] { init_options(opts, struct_size, default_init_options(), "opts"); });
}

DDP_API ddp_status ddp_collective_options_init(ddp_collective_options* opts, uint32_t struct_size) {
    return guarded([&] { init_options(opts, struct_size, default_collective_options(), "opts"); });
}

DDP_API ddp_status ddp_shard_options_init(ddp_shard_options* opts, uint32_t struct_size) {
    return guarded([&] { init_options(opts, struct_size, default_shard_options(), "opts"); });
}

DDP_API ddp_status ddp_init(const ddp_init_options* opts_in, ddp_comm** world) {
    return guarded([&] {
        require_not_null(world, "world");
        const ddp_init_options opts = read_options(opts_in, default_init_options(), "opts");
        const ddp_backend backend = chosen_backend(opts);
        const double timeout_s = chosen_timeout(opts);
        std::lock_guard lock(init_mutex);
        if (world_live)
            fail(DDP_ERR_ALREADY_INITIALIZED,
                 "ddp_init was called while the world from an earlier ddp_init is still live "
                 "(call ddp_finalize first, or reuse that communicator)");
        auto transport = make_transport(backend, opts.mpi_comm_fortran);
        const int device = assign_gpu(transport->local_rank());
        auto handle = std::make_unique<ddp_comm>();
        handle->live = std::make_unique<Communicator>(std::move(transport), timeout_s, device);
        const Transport& started = handle->live->transport();
        log_line(started.rank(), started.size(), DDP_LOG_DEBUG,
                 std::string("initialized backend ") + started.name() + ", local rank " +
                     std::to_string(started.local_rank()) + " of " + std::to_string(started.local_size()) +
                     ", device " + std::to_string(device));
        world_live = true;
        *world = handle.release();  // owned by the caller; see ddp_finalize
    });
}

DDP_API ddp_status ddp_finalize(ddp_comm* world) {
    return guarded([&] {
        require_not_null(world, "world");
        if (world->magic != ddp_comm::expected_magic)
            fail(DDP_ERR_INVALID_ARGUMENT, "world does not point to a ddp_comm");
        if (!world->live) return;  // already finalized
        std::lock_guard lock(init_mutex);
        std::unique_ptr<Communicator> communicator = std::move(world->live);
        world_live = false;
        communicator->finalize();
    });
}

DDP_API ddp_status ddp_rank(const ddp_comm* comm, int32_t* rank) {
    return guarded([&] { set_output(rank, live_comm(comm).transport().rank(), "rank"); });
}

DDP_API ddp_status ddp_size(const ddp_comm* comm, int32_t* size) {
    return guarded([&] { set_output(size, live_comm(comm).transport().size(), "size"); });
}

DDP_API ddp_status ddp_local_rank(const ddp_comm* comm, int32_t* local_rank) {
    return guarded(
        [&] { set_output(local_rank, live_comm(comm).transport().local_rank(), "local_rank"); });
}

DDP_API ddp_status ddp_local_size(const ddp_comm* comm, int32_t* local_size) {
    return guarded(
        [&] { set_output(local_size, live_comm(comm).transport().local_size(), "local_size"); });
}

DDP_API ddp_status ddp_device(const ddp_comm* comm, int32_t* device_id) {
    return guarded([&] { set_output(device_id, live_comm(comm).device(), "device_id"); });
}

DDP_API ddp_status ddp_backend_name(const ddp_comm* comm, const char** name) {
    return guarded([&] { set_output(name, live_comm(comm).transport().name(), "name"); });
}

DDP_API ddp_status ddp_allreduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                             ddp_op op, const ddp_collective_options* opts) {
    std::span<const ddp_tensor> list;
    ddp_op checked;
    int64_t fusion_bytes = 0;
    return guarded([&] {
        collective(
            comm, CollectiveKind::allreduce,
            [&](Communicator&) {
                list = checked_tensor_list(tensors, n, "tensors");
                checked = checked_op(op, list);
                fusion_bytes = effective_fusion_bytes(
                    read_options(opts, default_collective_options(), "opts").fusion_bytes);
            },
            [&](Communicator& c) { allreduce_list(c, list, checked, fusion_bytes); });
    });
}

DDP_API ddp_status ddp_allreduce_tensor_list_async(ddp_comm* comm, const ddp_tensor* tensors,
                                                   int64_t n, ddp_op op,
                                                   const ddp_collective_options* opts,
                                                   ddp_request** request) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        std::vector<ddp_tensor> list;
        ddp_op checked;
        int64_t fusion_bytes = 0;
        try {
            require_not_null(request, "request");
            const auto span = checked_tensor_list(tensors, n, "tensors");
            list.assign(span.begin(), span.end());
            checked = checked_op(op, list);
            fusion_bytes = effective_fusion_bytes(
                read_options(opts, default_collective_options(), "opts").fusion_bytes);
        } catch (const Error&) {
            try {
                c.run_in_order([&] { announce_invalid_call(c, CollectiveKind::allreduce); });
            } catch (const Error&) {
                // A broken communicator: the validation error is still the one to report.
            }
            throw;
        }
        auto state = c.submit([&c, list = std::move(list), checked, fusion_bytes] {
            allreduce_list(c, list, checked, fusion_bytes);
        });
        *request = std::make_unique<ddp_request>(ddp_request{std::move(state)}).release();
    });
}

DDP_API ddp_status ddp_request_wait(ddp_request* request) {
    return guarded([&] {
        std::string message;
        const ddp_status status = require_not_null(request, "request").state->wait(message);
        if (status != DDP_OK) fail(status, message);
    });
}

DDP_API ddp_status ddp_request_test(ddp_request* request, int32_t* done) {
    return guarded([&] {
        require_not_null(request, "request");
        require_not_null(done, "done");
        *done = request->state->done() ? 1 : 0;
        if (*done) {
            std::string message;
            const ddp_status status = request->state->wait(message);
            if (status != DDP_OK) fail(status, message);
        }
    });
}

DDP_API ddp_status ddp_request_free(ddp_request* request) {
    if (request == nullptr) return DDP_OK;
    std::unique_ptr<ddp_request> owned(request);
    return ddp_request_wait(owned.get());
}

DDP_API ddp_status ddp_broadcast_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                             int32_t root, const ddp_collective_options* opts) {
    std::span<const ddp_tensor> list;
    return guarded([&] {
        collective(
            comm, CollectiveKind::broadcast,
            [&](Communicator& c) {
                list = checked_tensor_list(tensors, n, "tensors");
                checked_root(root, c.transport().size());
            },
            [&](Communicator& c) { broadcast_list(c, list, root); });
    });
}

DDP_API ddp_status ddp_reduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                          ddp_op op, int32_t root,
                                          const ddp_collective_options* opts) {
    std::span<const ddp_tensor> list;
    ddp_op checked;
    return guarded([&] {
        collective(
            comm, CollectiveKind::reduce,
            [&](Communicator& c) {
                list = checked_tensor_list(tensors, n, "tensors");
                checked = checked_op(op, list);
                checked_root(root, c.transport().size());
            },
            [&](Communicator& c) { reduce_list(c, list, checked, root); });
    });
}

DDP_API ddp_status ddp_sync_optimizer_state(ddp_comm* comm, const ddp_tensor* leaves, int64_t n,
                                            double* scalars, int64_t n_scalars, int32_t root,
                                            const ddp_collective_options* opts) {
    std::span<const ddp_tensor> list;
    return guarded([&] {
        collective(
            comm, CollectiveKind::sync_optimizer_state,
            [&](Communicator& c) {
                list = checked_tensor_list(leaves, n, "leaves");
                if (n_scalars < 0)
                    fail(DDP_ERR_INVALID_ARGUMENT,
                         "n_scalars is " + std::to_string(n_scalars) + "; it must be >= 0");
                if (n_scalars > 0 && scalars == nullptr)
                    fail(DDP_ERR_INVALID_ARGUMENT,
                         "scalars is NULL but n_scalars is " + std::to_string(n_scalars));
                checked_root(root, c.transport().size());
            },
            [&](Communicator& c) {
                sync_optimizer_state(c, list, std::span(scalars, static_cast<size_t>(n_scalars)), root);
            });
    });
}

DDP_API ddp_status ddp_check_replicas(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                      const ddp_collective_options* opts, int32_t* identical) {
    std::span<const ddp_tensor> list;
    return guarded([&] {
        collective(
            comm, CollectiveKind::check_replicas,
            [&](Communicator&) {
                require_not_null(identical, "identical");
                list = checked_tensor_list(tensors, n, "tensors");
            },
            [&](Communicator& c) {
                std::string difference;
                *identical = check_replicas(c, list, difference) ? 1 : 0;
                if (!*identical) set_last_error(difference);
            });
    });
}

DDP_API ddp_status ddp_barrier(ddp_comm* comm, const ddp_collective_options* opts) {
    return guarded([&] {
        collective(comm, CollectiveKind::barrier, [](Communicator&) {},
                   [](Communicator& c) { barrier(c); });
    });
}

DDP_API ddp_status ddp_log(const ddp_comm* comm, ddp_log_level level, const char* msg) {
    return guarded([&] {
        const Transport& transport = live_comm(comm).transport();
        require_not_null(msg, "msg");
        if (!is_valid_log_level(level))
            fail(DDP_ERR_INVALID_ARGUMENT, "level " + std::to_string(level) + " is not a ddp_log_level");
        log_line(transport.rank(), transport.size(), level, msg);
    });
}

DDP_API ddp_status ddp_set_log_callback(ddp_log_callback fn, void* user) {
    set_log_callback(fn, user);
    return DDP_OK;
}

DDP_API ddp_status ddp_shard_count(int64_t n_items, int32_t world, const ddp_shard_options* opts_in,
                                   int64_t* count) {
    return guarded([&] {
        require_not_null(count, "count");
        if (n_items < 0)
            fail(DDP_ERR_INVALID_ARGUMENT, "n_items is " + std::to_string(n_items) + "; it must be >= 0");
        if (world < 1)
            fail(DDP_ERR_INVALID_ARGUMENT, "world is " + std::to_string(world) + "; it must be >= 1");
        const ddp_shard_options opts = read_options(opts_in, default_shard_options(), "opts");
        if (opts.strategy != DDP_SHARD_STRIDED && opts.strategy != DDP_SHARD_CONTIGUOUS)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "opts->strategy " + std::to_string(opts.strategy) + " is not a ddp_shard_strategy");
        *count = shard_count(n_items, world, opts);
    });
}

DDP_API ddp_status ddp_shard_indices(int64_t n_items, int32_t rank, int32_t world,
                                     const ddp_shard_options* opts, int64_t* out, int64_t capacity,
                                     int64_t* count) {
    int64_t needed = 0;
    const ddp_status counted = ddp_shard_count(n_items, world, opts, &needed);
    if (counted != DDP_OK) return counted;
    return guarded([&] {
        if (rank < 0 || rank >= world)
            fail(DDP_ERR_INVALID_ARGUMENT, "rank is " + std::to_string(rank) + "; it must be in [0, " +
                                               std::to_string(world) + ")");
        require_not_null(count, "count");
        if (capacity < needed) {
            *count = needed;
            fail(DDP_ERR_BUFFER_TOO_SMALL, "capacity is " + std::to_string(capacity) + " but rank " +
                                               std::to_string(rank) + " owns " + std::to_string(needed) +
                                               " items (ask ddp_shard_count first)");
        }
        if (needed > 0) require_not_null(out, "out");
        shard_indices(n_items, rank, world, read_options(opts, default_shard_options(), "opts"), out);
        *count = needed;
    });
}

}  // extern "C"
