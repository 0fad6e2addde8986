// The C boundary: every exported function lives here. Each one checks its
// arguments, calls into the C++ internals, and turns any exception into a
// status code plus the thread-local message. Nothing else is exported.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "api/options.hpp"
#include "api/validate.hpp"
#include "planes/nccl/nccl_plane.hpp"
#include "control/agreement.hpp"
#include "core/collectives.hpp"
#include "core/communicator.hpp"
#include "core/reducer.hpp"
#include "core/settings.hpp"
#include "core/shard.hpp"
#include "core/split.hpp"
#include "ddp/ddp.h"
#include "control/startup.hpp"
#include "trace/clock_sync.hpp"
#include "trace/timeline.hpp"
#include "core/device_collectives.hpp"
#include "device/cuda/cuda.hpp"
#include "util/dtype.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

// The handle behind ddp_comm*. It outlives finalize (see ddp_finalize's doc)
// so that a stale handle is recognised instead of dereferencing freed memory.
struct ddp_comm {
    static constexpr uint64_t expected_magic = 0x6464705f636f6d6dull;  // "ddp_comm"
    uint64_t magic = expected_magic;
    std::unique_ptr<ddp::Communicator> live;
    /// A sub-communicator's world (whatever it was split from); nullptr
    /// for the world itself.
    ddp_comm* world = nullptr;
    /// The world's live sub-communicators, oldest first, for ddp_finalize
    /// to release (guarded by init_mutex).
    std::vector<ddp_comm*> subs;
    /// At process exit: a communicator the program never finalized is left
    /// alone (tearing it down could wait for peers), not destroyed.
    ~ddp_comm() { static_cast<void>(live.release()); }
};

struct ddp_request {
    std::shared_ptr<ddp::RequestState> state;
    /// For a request that runs on the GPU: the end of its work on the stream.
    std::shared_ptr<ddp::cuda::Event> event;
};

struct ddp_reducer {
    ddp_comm* comm;  // checked on every call: the communicator may be finalized first
    std::unique_ptr<ddp::Reducer> reducer;
};

namespace {

using namespace ddp;

std::mutex init_mutex;
bool world_live = false;  // guarded by init_mutex

/// Every handle ddp_init returned. Handles outlive ddp_finalize (see its
/// doc) until the process ends; kept here, so that they are not leaks.
std::vector<std::unique_ptr<ddp_comm>>& handles() {
    static std::vector<std::unique_ptr<ddp_comm>> all;  // guarded by init_mutex
    return all;
}

// After a failed start, how long a rank waits for its peers to fail too.
constexpr double failed_start_wait_s = 10;

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
    if (handle->magic != ddp_comm::expected_magic) fail(DDP_ERR_INVALID_ARGUMENT, "comm does not point to a ddp_comm");
    if (!handle->live)
        fail(DDP_ERR_NOT_INITIALIZED, handle->world == nullptr
                                          ? "comm was finalized"
                                          : "comm is a sub-communicator that was freed (ddp_comm_free) or whose "
                                            "world was finalized (ddp_finalize)");
    return *handle->live;
}

/// A collective's per-call options, checked, with the fusion size resolved.
struct CallOptions {
    int64_t fusion_bytes;
    double timeout_s;
    void* cuda_stream;
    const char* const* names;
};

CallOptions checked_call_options(const ddp_collective_options* opts, const Communicator& comm) {
    const ddp_collective_options read = read_options(opts, default_collective_options(), "opts");
    if (read.fusion_bytes < -1)
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->fusion_bytes is " + std::to_string(read.fusion_bytes) +
                                           "; it must be -1 (no fusion), 0 (default) or a byte count");
    if (!(read.timeout_s >= 0) || std::isinf(read.timeout_s))
        fail(DDP_ERR_INVALID_ARGUMENT, "opts->timeout_s must be a finite number >= 0 (0: the communicator's)");
    return {read.fusion_bytes != 0 ? read.fusion_bytes : comm.settings().fusion_bytes, read.timeout_s,
            read.cuda_stream, read.names};
}

/// What a call's tensor list is called in its messages.
const char* list_name(CollectiveKind kind) {
    switch (kind) {
    case CollectiveKind::sync_optimizer_state: return "leaves";
    case CollectiveKind::reducer_create: return "gradients";
    case CollectiveKind::allgather:
    case CollectiveKind::reduce_scatter: return "inputs";
    default: return "tensors";
    }
}

/// What a collective entry point validates: its arguments, into a call.
using Describe = std::function<CollectiveCall(Communicator&, const CallOptions&)>;

/// The validated call, or the validation error (DDP_ERR_INVALID_ARGUMENT,
/// or DDP_ERR_UNSUPPORTED) as thrown. `timeout_s` gets the call's timeout
/// as far as it could be read, for announcing an invalid call.
CollectiveCall described_call(Communicator& comm, CollectiveKind kind, const ddp_collective_options* opts,
                              const Describe& describe, double& timeout_s) {
    const CallOptions options = checked_call_options(opts, comm);
    timeout_s = options.timeout_s;
    CollectiveCall call = describe(comm, options);
    call.kind = kind;
    call.timeout_s = options.timeout_s;
    call.on_device = checked_list_place(call.tensors, list_name(kind), comm.gpu());
    if (!call.outputs.empty()) checked_list_place(call.outputs, "outputs", comm.gpu());  // as the inputs' (checked_outputs)
    if (options.names != nullptr) call.names = std::span(options.names, call.tensors.size());
    if (call.on_device) {
        cuda::check_stream(options.cuda_stream);
        call.stream = options.cuda_stream;
    }
    return call;
}

/// For this rank's invalid call: takes part in agreement, so that its peers
/// return DDP_ERR_MISMATCH at once instead of waiting, then reports the
/// error, naming this rank. Must run in call order.
[[noreturn]] void report_invalid_call(Communicator& comm, CollectiveKind kind, double timeout_s, const Error& invalid) {
    try {
        announce_invalid_call(comm, kind, timeout_s, invalid.what());
    } catch (const Error&) {
        // A broken communicator: the validation error is still the one to report.
    }
    throw Error(invalid.status(), "rank " + std::to_string(comm.channel().rank()) + ": " + invalid.what());
}

/// Runs one blocking collective in order on the caller's thread.
void blocking_collective(ddp_comm* handle, CollectiveKind kind, const ddp_collective_options* opts,
                         const Describe& describe) {
    Communicator& comm = live_comm(handle);
    comm.run([&] {
        double timeout_s = 0;
        CollectiveCall call;
        try {
            call = described_call(comm, kind, opts, describe, timeout_s);
        } catch (const Error& invalid) {
            report_invalid_call(comm, kind, timeout_s, invalid);
        }
        run_collective(comm, call);
    });
}

/// The collective a binding names in ddp_report_invalid_call.
CollectiveKind checked_collective_kind(const char* name) {
    for (CollectiveKind kind : {CollectiveKind::allreduce, CollectiveKind::broadcast, CollectiveKind::reduce,
                                CollectiveKind::sync_optimizer_state, CollectiveKind::check_replicas,
                                CollectiveKind::barrier, CollectiveKind::reducer_create, CollectiveKind::allgather,
                                CollectiveKind::reduce_scatter, CollectiveKind::comm_split,
                                CollectiveKind::comm_split_node})
        if (std::string_view(name) == kind_name(static_cast<uint64_t>(kind))) return kind;
    fail(DDP_ERR_INVALID_ARGUMENT, "collective \"" + std::string(name) +
                                       "\" is not one of allreduce, broadcast, reduce, sync_optimizer_state, "
                                       "check_replicas, barrier, reducer_create, allgather, reduce_scatter, "
                                       "comm_split, comm_split_node");
}

/// A writable tensor list: valid tensors that do not overlap.
std::span<const ddp_tensor> checked_writable_list(const ddp_tensor* tensors, int64_t n, const char* what) {
    const auto list = checked_tensor_list(tensors, n, what);
    check_no_overlap(list, what);
    return list;
}

/// The transport to start first; for nccl, the host transport beside which
/// the nccl plane runs (NCCL itself starts once every rank's settings are good).
std::unique_ptr<Transport> make_transport(ddp_backend backend, int64_t mpi_comm_fortran) {
    switch (backend) {
    case DDP_BACKEND_MPI: return make_mpi_transport(mpi_comm_fortran);
    case DDP_BACKEND_NCCL: return mpi_launch_detected() ? make_mpi_transport(mpi_comm_fortran) : make_self_transport();
    default: return make_self_transport();
    }
}

/// The reducer keeps its buckets in host memory (see ddp_reducer_create).
void refuse_device_gradients(std::span<const ddp_tensor> gradients) {
    for (size_t i = 0; i < gradients.size(); ++i)
        if (gradients[i].device_type == DDP_DEVICE_CUDA)
            fail(DDP_ERR_UNSUPPORTED, "gradients[" + std::to_string(i) +
                                          "] is in device memory, but the reducer keeps its buckets in host memory "
                                          "in this version; reduce device gradients with ddp_allreduce_tensor_list");
}

/// An async call on the GPU: enqueued on the caller's stream now, in call
/// order; the watchdog completes the request when the GPU is done. Errors
/// of the operation (mismatch, timeout) go to the request, as they would
/// from the background thread.
std::unique_ptr<ddp_request> start_on_gpu(Communicator& comm, CollectiveCall& call) {
    call.gpu_request = std::make_shared<GpuRequest>();
    try {
        comm.run([&] { run_collective(comm, call); });
    } catch (const Error& error) {
        if (error.status() == DDP_ERR_INVALID_ARGUMENT) throw;  // another thread is inside: refused, as in submit
        call.gpu_request->state->complete(error.status(), error.what());
    }
    return std::make_unique<ddp_request>(ddp_request{call.gpu_request->state, call.gpu_request->event});
}

/// An async call on the communicator's background thread. Device buffers
/// staged through the host start there once the caller's stream has
/// reached the call (an event recorded now), on libddp's own stream.
std::unique_ptr<ddp_request> start_in_background(Communicator& comm, CollectiveCall call) {
    // The caller may free its arrays.
    std::vector<ddp_tensor> owned(call.tensors.begin(), call.tensors.end());
    std::vector<ddp_tensor> owned_outputs(call.outputs.begin(), call.outputs.end());
    // The names too, when a timeline will show them.
    trace::Timeline& timeline = comm.control().timeline();
    auto names = std::make_shared<std::vector<std::string>>();
    if (timeline.on())
        for (const char* name : call.names) names->push_back(name != nullptr ? name : "");
    const int64_t queued_ns = timeline.on() ? trace::now_ns() : 0;
    std::shared_ptr<cuda::Event> reached;
    if (call.on_device) {
        try {
            const cuda::DeviceScope on_device(comm.device());  // the event must be on the stream's GPU
            reached = std::make_shared<cuda::Event>();
            reached->record(call.stream);
        } catch (const Error& error) {
            // Before agreement: the peers learn of it there, instead of waiting.
            comm.run([&] { report_invalid_call(comm, call.kind, call.timeout_s, error); });
        }
    }
    auto state = comm.submit([&comm, owned = std::move(owned), owned_outputs = std::move(owned_outputs), reached, call,
                              names, queued_ns]() mutable {
        call.tensors = owned;
        call.outputs = owned_outputs;
        std::vector<const char*> name_pointers;
        for (const std::string& name : *names) name_pointers.push_back(name.c_str());
        call.names = name_pointers;
        trace::Timeline& timeline = comm.control().timeline();
        if (timeline.on() && queued_ns != 0) {
            trace::Event queued;
            queued.name = "queued";
            queued.tid = trace::thread_row(trace::Row::queue);
            queued.ts_ns = queued_ns;
            queued.dur_ns = trace::now_ns() - queued_ns;
            queued.bytes = 0;
            for (const ddp_tensor& tensor : call.tensors) queued.bytes += static_cast<int64_t>(byte_size(tensor));
            timeline.record(std::move(queued));
        }
        if (reached) {
            call.stream = comm.own_stream();
            reached->make_wait(call.stream);
        }
        run_collective(comm, call);
    });
    return std::make_unique<ddp_request>(ddp_request{std::move(state), nullptr});
}

/// Waits for the request and throws its error, if it failed.
void throw_if_failed(RequestState& state) {
    std::string message;
    const ddp_status status = state.wait(message);
    if (status != DDP_OK) fail(status, message);
}

/// Starts the timeline into `path`'s file for this rank (collective, in
/// call order): agreement, then the clock exchange whose offsets the file records.
void start_timeline(Communicator& comm, const char* path) {
    comm.run([&] {
        ControlChannel& channel = comm.channel();
        ControlPlane& control = comm.control();
        trace::Timeline& timeline = control.timeline();
        try {
            require_not_null(path, "path");
            timeline.open(trace::per_rank_path(path, channel.rank()), channel.rank(), channel.size(),
                          comm.backend_name());
        } catch (const Error& invalid) {
            report_invalid_call(comm, CollectiveKind::timeline_start, 0, invalid);
        }
        try {
            CallContext context = control.begin(CollectiveKind::timeline_start, 0);
            CallScope scope(control);
            const int64_t started_ns = trace::now_ns();
            agree(channel, control, context, encode(CallDescription{CollectiveKind::timeline_start, DDP_OP_SUM, 0, 0, 0, {}}));
            timeline.start(trace::measure_clock_offset(channel, control, context));
            trace::Event call;
            call.name = kind_name(static_cast<uint64_t>(CollectiveKind::timeline_start));
            call.tid = trace::thread_row(trace::Row::calls);
            call.ts_ns = started_ns;
            call.dur_ns = trace::now_ns() - started_ns;
            call.sequence = context.sequence;
            call.plane = comm.backend_name();
            timeline.record(std::move(call));
        } catch (...) {
            timeline.stop();  // closes the file it opened
            throw;
        }
    });
}

/// Starts one async collective in call order: on the GPU, or on the
/// background thread. Invalid arguments are reported (and announced to the
/// peers) here.
void async_collective(ddp_comm* handle, CollectiveKind kind, const ddp_collective_options* opts,
                      ddp_request** request, const Describe& describe) {
    Communicator& comm = live_comm(handle);
    double timeout_s = 0;
    CollectiveCall call;
    try {
        call = described_call(comm, kind, opts,
                              [&](Communicator& c, const CallOptions& options) {
                                  require_not_null(request, "request");
                                  return describe(c, options);
                              },
                              timeout_s);
    } catch (const Error& invalid) {
        // In order: after the requests queued before this one.
        comm.run([&] { report_invalid_call(comm, kind, timeout_s, invalid); });
    }
    *request = (runs_on_gpu(comm, call) ? start_on_gpu(comm, call) : start_in_background(comm, call)).release();
}

CollectiveCall allreduce_call(const ddp_tensor* tensors, int64_t n, int op, const CallOptions& options) {
    CollectiveCall call;
    call.tensors = checked_writable_list(tensors, n, "tensors");
    call.op = checked_op(op, call.tensors);
    call.fusion_bytes = options.fusion_bytes;
    return call;
}

/// allgather's or reduce_scatter's call: inputs read, outputs written.
CollectiveCall sharded_call(Communicator& comm, const ddp_tensor* inputs, const ddp_tensor* outputs, int64_t n,
                            Sharding sharding, const CallOptions& options) {
    CollectiveCall call;
    call.tensors = checked_tensor_list(inputs, n, "inputs");
    call.outputs = checked_outputs(call.tensors, outputs, sharding, comm.channel().size(), comm.channel().rank());
    call.fusion_bytes = options.fusion_bytes;
    return call;
}

CollectiveCall reduce_scatter_call(Communicator& comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                   int64_t n, int op, const CallOptions& options) {
    CollectiveCall call = sharded_call(comm, inputs, outputs, n, Sharding::scatter, options);
    call.op = checked_op(op, call.tensors);
    return call;
}

/// ddp_comm_split and ddp_comm_split_node: validation (an invalid call
/// still takes part, so that the peers fail at once), the split, and the
/// new handle, registered with the world.
void split_handle(ddp_comm* handle, SplitRequest request, const ddp_split_options* opts, ddp_comm** out,
                  const char* out_name) {
    Communicator& parent = live_comm(handle);
    parent.run([&] {
        try {
            require_not_null(out, out_name);
            const ddp_split_options read = read_options(opts, default_split_options(), "opts");
            if (!(read.timeout_s >= 0) || std::isinf(read.timeout_s))
                fail(DDP_ERR_INVALID_ARGUMENT, "opts->timeout_s must be a finite number >= 0 (0: the parent's)");
            request.timeout_s = read.timeout_s;
            if (request.color < 0 && request.color != DDP_COLOR_UNDEFINED)
                fail(DDP_ERR_INVALID_ARGUMENT, "color is " + std::to_string(request.color) +
                                                   "; it must be >= 0, or DDP_COLOR_UNDEFINED (-1) to join none");
        } catch (const Error& invalid) {
            report_invalid_call(parent, request.kind, 0, invalid);
        }
        std::unique_ptr<Communicator> made = split_communicator(parent, request);
        if (!made) {
            *out = nullptr;
            return;
        }
        auto sub = std::make_unique<ddp_comm>();
        sub->live = std::move(made);
        sub->world = handle->world != nullptr ? handle->world : handle;
        std::lock_guard lock(init_mutex);
        sub->world->subs.push_back(sub.get());
        *out = sub.get();
        handles().push_back(std::move(sub));
    });
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

DDP_API ddp_status ddp_split_options_init(ddp_split_options* opts, uint32_t struct_size) {
    return guarded([&] { init_options(opts, struct_size, default_split_options(), "opts"); });
}

DDP_API ddp_status ddp_init(const ddp_init_options* opts_in, ddp_comm** world) {
    return guarded([&] {
        require_not_null(world, "world");
        const ddp_init_options opts = read_options(opts_in, default_init_options(), "opts");
        check_init_options(opts);
        std::lock_guard lock(init_mutex);
        if (world_live)
            fail(DDP_ERR_ALREADY_INITIALIZED,
                 "ddp_init was called while the world from an earlier ddp_init is still live "
                 "(call ddp_finalize first, or reuse that communicator)");
        // A rank with a bad option or environment still starts the backend,
        // so that every rank's ddp_init fails together (see Settings).
        std::optional<Error> invalid;
        Settings settings;
        try {
            settings = resolve_settings(opts);
        } catch (const Error& error) {
            invalid = error;
            settings.backend = fallback_backend(opts);
        }
        std::unique_ptr<Transport> transport = make_transport(settings.backend, opts.mpi_comm_fortran);
        std::unique_ptr<DevicePlane> device_plane;
        cuda::GpuAssignment gpu;
        try {
            fail_together(transport->channel(), invalid, settings.timeout_s, DDP_ERR_MISMATCH,
                          "could not start libddp (their ddp_init returned DDP_ERR_INVALID_ARGUMENT naming the "
                          "option or environment variable), so no rank starts");
            set_log_threshold(settings.log_threshold);
            gpu = cuda::assign_gpu(transport->channel().local_rank());
            if (settings.backend == DDP_BACKEND_NCCL) device_plane = make_nccl_plane(*transport, gpu, settings.timeout_s);
        } catch (const Error&) {
            transport->finalize(all_reach(transport->channel(), failed_start_wait_s));
            throw;
        }
        auto handle = std::make_unique<ddp_comm>();
        handle->live =
            std::make_unique<Communicator>(std::move(transport), std::move(device_plane), settings, std::move(gpu));
        if (!settings.timeline_path.empty()) {  // DDP_TIMELINE: every rank starts it here, together
            try {
                start_timeline(*handle->live, settings.timeline_path.c_str());
            } catch (const Error& error) {
                handle->live->finalize();
                fail(error.status(), "DDP_TIMELINE: " + std::string(error.what()));
            }
        }
        const ControlChannel& started = handle->live->channel();
        log_line(started.rank(), started.size(), DDP_LOG_DEBUG,
                 std::string("initialized backend ") + handle->live->backend_name() + ", local rank " +
                     std::to_string(started.local_rank()) + " of " + std::to_string(started.local_size()) +
                     ", device " + std::to_string(handle->live->device()));
        world_live = true;
        *world = handle.get();
        handles().push_back(std::move(handle));
    });
}

DDP_API ddp_status ddp_finalize(ddp_comm* world) {
    return guarded([&] {
        require_not_null(world, "world");
        if (world->magic != ddp_comm::expected_magic) fail(DDP_ERR_INVALID_ARGUMENT, "world does not point to a ddp_comm");
        if (world->world != nullptr)
            fail(DDP_ERR_INVALID_ARGUMENT, "world is a sub-communicator (from ddp_comm_split); free it with "
                                           "ddp_comm_free, and finalize the world it came from with ddp_finalize");
        std::lock_guard lock(init_mutex);
        if (!world->live) return;  // already finalized
        std::vector<Communicator*> subs;
        for (ddp_comm* sub : world->subs) subs.push_back(sub->live.get());
        // Refused (nothing released) while another thread is inside a call on it or on a sub.
        world->live->finalize(subs);
        for (ddp_comm* sub : world->subs) std::unique_ptr<Communicator> released = std::move(sub->live);
        world->subs.clear();
        std::unique_ptr<Communicator> communicator = std::move(world->live);
        world_live = false;
    });
}

DDP_API ddp_status ddp_comm_split(ddp_comm* comm, int32_t color, int32_t key, const ddp_split_options* opts,
                                  ddp_comm** sub) {
    return guarded([&] {
        split_handle(comm, SplitRequest{CollectiveKind::comm_split, color, key, 0}, opts, sub, "sub");
    });
}

DDP_API ddp_status ddp_comm_split_node(ddp_comm* comm, const ddp_split_options* opts, ddp_comm** node) {
    return guarded([&] {
        split_handle(comm, SplitRequest{CollectiveKind::comm_split_node, 0, 0, 0}, opts, node, "node");
    });
}

DDP_API ddp_status ddp_comm_free(ddp_comm* sub) {
    if (sub == nullptr) return DDP_OK;  // a rank that joined no sub-communicator
    return guarded([&] {
        if (sub->magic != ddp_comm::expected_magic) fail(DDP_ERR_INVALID_ARGUMENT, "sub does not point to a ddp_comm");
        if (sub->world == nullptr)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "sub is the world communicator (from ddp_init); end it with ddp_finalize, which also frees its "
                 "sub-communicators");
        if (!sub->live) return;  // already freed (or finalized with its world)
        sub->live->finalize();  // refused (nothing released) while another thread is inside a call on it
        std::lock_guard lock(init_mutex);
        std::erase(sub->world->subs, sub);
        std::unique_ptr<Communicator> released = std::move(sub->live);
    });
}

DDP_API ddp_status ddp_rank(const ddp_comm* comm, int32_t* rank) {
    return guarded([&] { set_output(rank, live_comm(comm).channel().rank(), "rank"); });
}

DDP_API ddp_status ddp_size(const ddp_comm* comm, int32_t* size) {
    return guarded([&] { set_output(size, live_comm(comm).channel().size(), "size"); });
}

DDP_API ddp_status ddp_local_rank(const ddp_comm* comm, int32_t* local_rank) {
    return guarded([&] { set_output(local_rank, live_comm(comm).channel().local_rank(), "local_rank"); });
}

DDP_API ddp_status ddp_local_size(const ddp_comm* comm, int32_t* local_size) {
    return guarded([&] { set_output(local_size, live_comm(comm).channel().local_size(), "local_size"); });
}

DDP_API ddp_status ddp_device(const ddp_comm* comm, int32_t* device_id) {
    return guarded([&] { set_output(device_id, live_comm(comm).device(), "device_id"); });
}

DDP_API ddp_status ddp_backend_name(const ddp_comm* comm, const char** name) {
    return guarded([&] { set_output(name, live_comm(comm).backend_name(), "name"); });
}

DDP_API ddp_status ddp_allreduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                             const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::allreduce, opts, [&](Communicator&, const CallOptions& options) {
            return allreduce_call(tensors, n, op, options);
        });
    });
}

DDP_API ddp_status ddp_allreduce_tensor_list_async(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                                   const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::allreduce, opts, request, [&](Communicator&, const CallOptions& options) {
            return allreduce_call(tensors, n, op, options);
        });
    });
}

DDP_API ddp_status ddp_request_wait(ddp_request* request) {
    return guarded([&] {
        throw_if_failed(*require_not_null(request, "request").state);
    });
}

DDP_API ddp_status ddp_request_test(ddp_request* request, int32_t* done) {
    return guarded([&] {
        require_not_null(request, "request");
        require_not_null(done, "done");
        *done = request->state->done() ? 1 : 0;
        if (*done) throw_if_failed(*request->state);
    });
}

DDP_API ddp_status ddp_request_stream_wait(ddp_request* request, void* cuda_stream) {
    return guarded([&] {
        require_not_null(request, "request");
        if (!request->event) {  // not on the GPU (or not yet enqueued there): the host waits
            throw_if_failed(*request->state);
            return;
        }
        request->event->make_wait(cuda_stream);
        if (request->state->done()) throw_if_failed(*request->state);
    });
}

DDP_API ddp_status ddp_request_free(ddp_request* request) {
    if (request == nullptr) return DDP_OK;
    std::unique_ptr<ddp_request> owned(request);
    return ddp_request_wait(owned.get());
}

DDP_API ddp_status ddp_broadcast_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, int32_t root,
                                             const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::broadcast, opts, [&](Communicator& c, const CallOptions& options) {
            CollectiveCall call;
            call.tensors = checked_writable_list(tensors, n, "tensors");
            call.root = checked_root(root, c.channel().size());
            call.fusion_bytes = options.fusion_bytes;
            return call;
        });
    });
}

DDP_API ddp_status ddp_reduce_tensor_list(ddp_comm* comm, const ddp_tensor* tensors, int64_t n, ddp_op op,
                                          int32_t root, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::reduce, opts, [&](Communicator& c, const CallOptions& options) {
            CollectiveCall call;
            call.tensors = checked_writable_list(tensors, n, "tensors");
            call.op = checked_op(op, call.tensors);
            call.root = checked_root(root, c.channel().size());
            call.fusion_bytes = options.fusion_bytes;
            return call;
        });
    });
}

DDP_API ddp_status ddp_allgather_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                             int64_t n, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::allgather, opts, [&](Communicator& c, const CallOptions& options) {
            return sharded_call(c, inputs, outputs, n, Sharding::gather, options);
        });
    });
}

DDP_API ddp_status ddp_allgather_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                   const ddp_tensor* outputs, int64_t n,
                                                   const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::allgather, opts, request, [&](Communicator& c, const CallOptions& options) {
            return sharded_call(c, inputs, outputs, n, Sharding::gather, options);
        });
    });
}

DDP_API ddp_status ddp_reduce_scatter_tensor_list(ddp_comm* comm, const ddp_tensor* inputs, const ddp_tensor* outputs,
                                                  int64_t n, ddp_op op, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::reduce_scatter, opts,
                            [&](Communicator& c, const CallOptions& options) {
                                return reduce_scatter_call(c, inputs, outputs, n, op, options);
                            });
    });
}

DDP_API ddp_status ddp_reduce_scatter_tensor_list_async(ddp_comm* comm, const ddp_tensor* inputs,
                                                        const ddp_tensor* outputs, int64_t n, ddp_op op,
                                                        const ddp_collective_options* opts, ddp_request** request) {
    return guarded([&] {
        async_collective(comm, CollectiveKind::reduce_scatter, opts, request,
                         [&](Communicator& c, const CallOptions& options) {
                             return reduce_scatter_call(c, inputs, outputs, n, op, options);
                         });
    });
}

DDP_API ddp_status ddp_sync_optimizer_state(ddp_comm* comm, const ddp_tensor* leaves, int64_t n, double* scalars,
                                            int64_t n_scalars, int32_t root, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(
            comm, CollectiveKind::sync_optimizer_state, opts, [&](Communicator& c, const CallOptions& options) {
                CollectiveCall call;
                call.tensors = checked_writable_list(leaves, n, "leaves");
                if (n_scalars < 0)
                    fail(DDP_ERR_INVALID_ARGUMENT, "n_scalars is " + std::to_string(n_scalars) + "; it must be >= 0");
                if (n_scalars > 0 && scalars == nullptr)
                    fail(DDP_ERR_INVALID_ARGUMENT, "scalars is NULL but n_scalars is " + std::to_string(n_scalars));
                call.scalars = std::span(scalars, static_cast<size_t>(n_scalars));
                call.root = checked_root(root, c.channel().size());
                call.fusion_bytes = options.fusion_bytes;
                return call;
            });
    });
}

DDP_API ddp_status ddp_check_replicas(ddp_comm* comm, const ddp_tensor* tensors, int64_t n,
                                      const ddp_collective_options* opts, int32_t* identical) {
    return guarded([&] {
        bool same = true;
        std::string difference;
        blocking_collective(comm, CollectiveKind::check_replicas, opts, [&](Communicator&, const CallOptions&) {
            require_not_null(identical, "identical");
            CollectiveCall call;
            call.tensors = checked_tensor_list(tensors, n, "tensors");  // read only: overlap is fine
            call.identical = &same;
            call.difference = &difference;
            return call;
        });
        *identical = same ? 1 : 0;
        if (!same) set_last_error(difference);
    });
}

DDP_API ddp_status ddp_barrier(ddp_comm* comm, const ddp_collective_options* opts) {
    return guarded([&] {
        blocking_collective(comm, CollectiveKind::barrier, opts,
                            [](Communicator&, const CallOptions&) { return CollectiveCall{}; });
    });
}

DDP_API ddp_status ddp_timeline_start(ddp_comm* comm, const char* path) {
    return guarded([&] { start_timeline(live_comm(comm), path); });
}

DDP_API ddp_status ddp_timeline_stop(ddp_comm* comm) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        c.run_reducer_call([&] {
            c.drain_async();  // the queued requests' events belong in the file
            c.control().timeline().stop();
        });
    });
}

DDP_API ddp_status ddp_dump_flight_recorder(ddp_comm* comm, const char* path) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        const std::string file = path != nullptr ? trace::per_rank_path(path, c.channel().rank()) : std::string();
        c.control().flight_recorder().dump("ddp_dump_flight_recorder", file);
    });
}

DDP_API ddp_status ddp_log(const ddp_comm* comm, ddp_log_level level, const char* msg) {
    return guarded([&] {
        const ControlChannel& channel = live_comm(comm).channel();
        require_not_null(msg, "msg");
        if (!is_valid_log_level(level))
            fail(DDP_ERR_INVALID_ARGUMENT, "level " + std::to_string(level) + " is not a ddp_log_level");
        log_line(channel.rank(), channel.size(), level, msg);
    });
}

DDP_API ddp_status ddp_set_log_callback(ddp_log_callback fn, void* user) {
    set_log_callback(fn, user);
    return DDP_OK;
}

DDP_API ddp_status ddp_shard_count(int64_t n_items, int32_t world, const ddp_shard_options* opts_in, int64_t* count) {
    return guarded([&] {
        require_not_null(count, "count");
        if (n_items < 0) fail(DDP_ERR_INVALID_ARGUMENT, "n_items is " + std::to_string(n_items) + "; it must be >= 0");
        if (world < 1) fail(DDP_ERR_INVALID_ARGUMENT, "world is " + std::to_string(world) + "; it must be >= 1");
        const ddp_shard_options opts = read_options(opts_in, default_shard_options(), "opts");
        if (opts.strategy != DDP_SHARD_STRIDED && opts.strategy != DDP_SHARD_CONTIGUOUS)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "opts->strategy " + std::to_string(opts.strategy) + " is not a ddp_shard_strategy");
        *count = shard_count(n_items, world, opts);
    });
}

DDP_API ddp_status ddp_shard_indices(int64_t n_items, int32_t rank, int32_t world, const ddp_shard_options* opts_in,
                                     int64_t* out, int64_t capacity, int64_t* count) {
    int64_t needed = 0;
    const ddp_status counted = ddp_shard_count(n_items, world, opts_in, &needed);
    if (counted != DDP_OK) return counted;
    return guarded([&] {
        if (rank < 0 || rank >= world)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "rank is " + std::to_string(rank) + "; it must be in [0, " + std::to_string(world) + ")");
        require_not_null(count, "count");
        const ddp_shard_options opts = read_options(opts_in, default_shard_options(), "opts");
        if (opts.shuffle && n_items > DDP_SHARD_SHUFFLE_MAX_ITEMS)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "n_items is " + std::to_string(n_items) + " but a shuffled shard accepts at most " +
                     std::to_string(DDP_SHARD_SHUFFLE_MAX_ITEMS) +
                     " (DDP_SHARD_SHUFFLE_MAX_ITEMS: the permutation needs memory for every item); shard "
                     "without shuffle, or shuffle blocks of items");
        if (capacity < needed) {
            *count = needed;
            fail(DDP_ERR_BUFFER_TOO_SMALL, "capacity is " + std::to_string(capacity) + " but rank " +
                                               std::to_string(rank) + " owns " + std::to_string(needed) +
                                               " items (ask ddp_shard_count first)");
        }
        if (needed > 0) require_not_null(out, "out");
        shard_indices(n_items, rank, world, opts, std::span(out, static_cast<size_t>(needed)));
        *count = needed;
    });
}

DDP_API ddp_status ddp_reducer_create(ddp_comm* comm, const ddp_tensor* gradients, int64_t n, ddp_op op,
                                      const ddp_collective_options* opts, ddp_reducer** reducer) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        c.run([&] {
            double timeout_s = 0;
            CollectiveCall call;
            try {
                call = described_call(c, CollectiveKind::reducer_create, opts,
                                      [&](Communicator&, const CallOptions& options) {
                                          require_not_null(reducer, "reducer");
                                          CollectiveCall valid;
                                          valid.tensors =
                                              checked_tensor_list(gradients, n, "gradients", DataPointers::ignored);
                                          refuse_device_gradients(valid.tensors);
                                          valid.op = checked_op(op, valid.tensors);
                                          valid.fusion_bytes = options.fusion_bytes;
                                          return valid;
                                      },
                                      timeout_s);
            } catch (const Error& invalid) {
                report_invalid_call(c, CollectiveKind::reducer_create, timeout_s, invalid);
            }
            const int64_t bucket_bytes = call.fusion_bytes > 0 ? call.fusion_bytes : 0;
            auto made = std::make_unique<ddp_reducer>(ddp_reducer{
                comm, std::make_unique<Reducer>(c, call.tensors, call.op, bucket_bytes, call.timeout_s, call.names)});
            *reducer = made.release();
        });
    });
}

namespace {
Reducer& live_reducer(ddp_reducer* handle) {
    if (handle == nullptr) fail(DDP_ERR_INVALID_ARGUMENT, "reducer is NULL");
    live_comm(handle->comm);
    return *handle->reducer;
}

size_t checked_gradient_index(const Reducer& reducer, int64_t index) {
    if (index < 0 || index >= reducer.size())
        fail(DDP_ERR_INVALID_ARGUMENT, "index is " + std::to_string(index) + "; the reducer has " +
                                           std::to_string(reducer.size()) + " gradients");
    return static_cast<size_t>(index);
}
}  // namespace

DDP_API ddp_status ddp_reducer_gradient(ddp_reducer* reducer, int64_t index, ddp_tensor* gradient) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        checked_gradient_index(r, index);
        require_not_null(gradient, "gradient") = r.gradient(index);
    });
}

DDP_API ddp_status ddp_reducer_mark_ready(ddp_reducer* reducer, int64_t index) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        checked_gradient_index(r, index);
        live_comm(reducer->comm).run_reducer_call([&] { r.mark_ready(index); });
    });
}

DDP_API ddp_status ddp_reducer_wait(ddp_reducer* reducer) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        live_comm(reducer->comm).run_reducer_call([&] { r.wait(); });
    });
}

DDP_API ddp_status ddp_reducer_fail_step(ddp_reducer* reducer, const char* reason) {
    return guarded([&] {
        Reducer& r = live_reducer(reducer);
        try {
            live_comm(reducer->comm).run_reducer_call([&] { r.wait(std::string_view(reason != nullptr ? reason : "")); });
        } catch (const Error& error) {
            // The step ended, as a mismatch (what it is for) or broken: the binding reports its own error.
            if (error.status() == DDP_ERR_INVALID_ARGUMENT) throw;  // refused: another thread is inside, or another reducer's step is open
        }
    });
}

DDP_API ddp_status ddp_reducer_free(ddp_reducer* reducer) {
    if (reducer == nullptr) return DDP_OK;
    return guarded([&] {
        const bool comm_live = reducer->comm != nullptr && reducer->comm->magic == ddp_comm::expected_magic &&
                               reducer->comm->live;
        if (!comm_live) {  // the communicator is gone: nothing can be in flight any more
            std::unique_ptr<ddp_reducer> owned(reducer);
            owned->reducer->communicator_gone();
            return;
        }
        // Refused (and nothing freed) while another thread is inside a call on the communicator.
        reducer->comm->live->run_reducer_call([&] {
            std::unique_ptr<ddp_reducer> owned(reducer);
            if (owned->reducer->step_open()) owned->reducer->wait();
        });
    });
}

DDP_API ddp_status ddp_report_invalid_call(ddp_comm* comm, const char* collective, const char* reason,
                                           const ddp_collective_options* opts) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        require_not_null(collective, "collective");
        const CollectiveKind kind = checked_collective_kind(collective);
        double timeout_s = 0;
        try {
            timeout_s = checked_call_options(opts, c).timeout_s;
        } catch (const Error&) {
            // The call's own timeout could not be read: the communicator's serves.
        }
        c.run([&] {
            try {
                announce_invalid_call(c, kind, timeout_s, reason != nullptr ? reason : "");
            } catch (const Error&) {
                // A broken communicator: the binding's own error is still the one to report.
            }
        });
    });
}

DDP_API ddp_status ddp_comm_abort(ddp_comm* comm, const char* reason) {
    return guarded([&] {
        Communicator& c = live_comm(comm);
        c.control().abort(reason != nullptr ? reason : "no reason given");
    });
}

}  // extern "C"
