#include "planes/nccl/nccl_plane.hpp"

#include <array>
#include <cstdio>
#include <mutex>
#include <optional>
#include <vector>

#include "planes/nccl/capabilities.hpp"
#include "planes/nccl/device_fusion.hpp"
#include "planes/nccl/local_ranks.hpp"
#include "planes/nccl/nccl_comm.hpp"
#include "planes/nccl/nccl_library.hpp"
#include "planes/nccl/watchdog.hpp"
#include "control/control_plane.hpp"
#include "control/startup.hpp"
#include "util/dtype.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {


ncclDataType_t nccl_type(int32_t dtype) {
    switch (dtype) {
    case DDP_DTYPE_I8: return ncclInt8;
    case DDP_DTYPE_I32: return ncclInt32;
    case DDP_DTYPE_I64: return ncclInt64;
    case DDP_DTYPE_U8: return ncclUint8;
    case DDP_DTYPE_F16: return ncclFloat16;
    case DDP_DTYPE_F32: return ncclFloat32;
    case DDP_DTYPE_F64: return ncclFloat64;
    case DDP_DTYPE_BF16: return ncclBfloat16;
    default: fail(DDP_ERR_INTERNAL, "nccl_type of an unchecked dtype");
    }
}

ncclRedOp_t nccl_op(ddp_op op) {
    switch (op) {
    case DDP_OP_SUM:
    case DDP_OP_AVG: return ncclSum;  // AVG divides after (see DevicePlane)
    case DDP_OP_MIN: return ncclMin;
    case DDP_OP_MAX: return ncclMax;
    case DDP_OP_PROD: return ncclProd;
    }
    fail(DDP_ERR_INTERNAL, "nccl_op of an unchecked op");
}

std::string uuid_text(uint64_t high, uint64_t low) {
    char text[40];
    std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(high),
                  static_cast<unsigned long long>(low));
    return text;
}

class NcclPlane final : public DevicePlane {
public:
    /// `channel`: the control channel of the transport beside which it runs;
    /// `gate`: where the ranks of this process meet before each launch (null: one rank here).
    NcclPlane(ControlChannel& channel, int device, std::unique_ptr<NcclComm> comm, double timeout_s,
              std::shared_ptr<LaunchGate> gate)
        : channel_(channel),
          device_(device),
          comm_(std::move(comm)),
          gate_(std::move(gate)),
          timeout_s_(timeout_s),
          watchdog_(std::make_unique<Watchdog>(
              device, [this] { return known_failure(); },
              [this](ddp_status status, const std::string& message) { watchdog_failed(status, message); })) {}

    ~NcclPlane() override {
        if (watchdog_) watchdog_->stop();  // its thread may still be in a callback that uses this
    }

    const char* name() const override { return "nccl"; }

    void stop_work() override {
        if (comm_)
            abort_nccl(DDP_ERR_TIMEOUT, "the communicator was broken on this rank (a timeout, ddp_comm_abort, or "
                                        "a failure on the GPU) while this work was on the GPU");
    }

    void finalize(bool peers_present) override {
        if (!watchdog_) return;
        // Async requests on the GPU get up to the communicator's timeout to finish.
        const bool drained = peers_present && watchdog_->drain(deadline_after(timeout_s_));
        if (!drained)
            abort_nccl(DDP_ERR_NOT_INITIALIZED, "the communicator was finalized while this work was on the GPU");
        watchdog_->stop();  // before the pointer goes: its thread may be in a callback that uses it
        watchdog_.reset();
        comm_.reset();  // destroys NCCL in bounded time, or it was aborted
    }

    std::unique_ptr<DevicePlane> split(int color, int key, ControlChannel* sub, Clock::time_point deadline) override {
        std::unique_ptr<NcclComm> comm;
        std::shared_ptr<LaunchGate> sub_gate;
        try {
            // The ranks of this process meet first (ncclCommSplit allocates) and
            // leave with the gate of their sub-communicator's ranks here.
            if (gate_)
                sub_gate = gate_->split(channel_.rank(), sub ? std::optional<int>(color) : std::nullopt,
                                        sub ? sub->rank() : -1, deadline, [this] { return stop_reason(); });
            // Watched work fails before NCCL is aborted (aborted kernels end as if they had finished).
            const NcclComm::Failing failing = [this](ddp_status status, const std::string& message) {
                watchdog_->fail_all(status, message);
            };
            comm = NcclComm::split(*comm_, color, key, deadline, failing);
            if (comm) comm->add_launcher(sub->rank(), deadline, failing);
        } catch (const Error& error) {
            if (error.status() == DDP_ERR_UNSUPPORTED) throw;  // no NCCL call was made: the parent is intact
            // Peers may still be inside the split on the parent: break it (it tells its peers).
            watchdog_->fail_all(error.status(), error.what());
            watchdog_failed(error.status(), error.what());
            throw;
        }
        if (sub == nullptr) return nullptr;
        if (!comm) fail(DDP_ERR_INTERNAL, "ncclCommSplit gave no communicator to a rank with a color");
        return std::make_unique<NcclPlane>(*sub, device_, std::move(comm), timeout_s_, std::move(sub_gate));
    }

    std::span<const Capability> capabilities() const override { return nccl_capabilities; }

    // allreduce packs the small tensors into buckets (device_fusion.hpp).
    void allreduce(std::span<const ddp_tensor> list, ddp_op op, void* stream, Clock::time_point deadline) override {
        const std::vector<ddp_tensor> tensors = fusion_.pack(list, stream);
        group_of(tensors, deadline, "ncclAllReduce", [&](const ddp_tensor& t, const NcclLibrary& nccl, ncclComm_t comm) {
            return nccl.all_reduce(t.data, t.data, static_cast<size_t>(t.count), nccl_type(t.dtype), nccl_op(op), comm,
                                   static_cast<cudaStream_t>(stream));
        });
        if (op == DDP_OP_AVG) divide_by_size(tensors, stream);
        fusion_.unpack(stream);
    }

    void reduce(std::span<const ddp_tensor> tensors, ddp_op op, int root, void* stream,
                Clock::time_point deadline) override {
        group_of(tensors, deadline, "ncclReduce", [&](const ddp_tensor& t, const NcclLibrary& nccl, ncclComm_t comm) {
            return nccl.reduce(t.data, t.data, static_cast<size_t>(t.count), nccl_type(t.dtype), nccl_op(op), root,
                               comm, static_cast<cudaStream_t>(stream));
        });
        if (op == DDP_OP_AVG && channel_.rank() == root) divide_by_size(tensors, stream);
    }

    void broadcast(std::span<const ddp_tensor> tensors, int root, void* stream, Clock::time_point deadline) override {
        group_of(tensors, deadline, "ncclBroadcast", [&](const ddp_tensor& t, const NcclLibrary& nccl, ncclComm_t comm) {
            return nccl.broadcast(t.data, t.data, byte_size(t), ncclUint8,
                                  root, comm, static_cast<cudaStream_t>(stream));
        });
    }

    void allgather(std::span<const ddp_tensor> inputs, std::span<const ddp_tensor> outputs, void* stream,
                   Clock::time_point deadline) override {
        pairs_of(inputs, outputs, deadline, "ncclAllGather",
                 [&](const ddp_tensor& in, const ddp_tensor& out, const NcclLibrary& nccl, ncclComm_t comm) {
                     return nccl.all_gather(in.data, out.data, byte_size(in), ncclUint8, comm,
                                            static_cast<cudaStream_t>(stream));
                 });
    }

    void reduce_scatter(std::span<const ddp_tensor> inputs, std::span<const ddp_tensor> outputs, ddp_op op,
                        void* stream, Clock::time_point deadline) override {
        pairs_of(inputs, outputs, deadline, "ncclReduceScatter",
                 [&](const ddp_tensor& in, const ddp_tensor& out, const NcclLibrary& nccl, ncclComm_t comm) {
                     return nccl.reduce_scatter(in.data, out.data, static_cast<size_t>(out.count), nccl_type(in.dtype),
                                                nccl_op(op), comm, static_cast<cudaStream_t>(stream));
                 });
        if (op == DDP_OP_AVG) divide_by_size(outputs, stream);
    }

    // One group of ncclSend and ncclRecv: NCCL keeps the messages between
    // two ranks in order, which is the exchange's k-th-meets-k-th rule.
    void exchange(const Exchange& exchange, void* stream, Clock::time_point deadline) override {
        const char* what = "ncclSend/ncclRecv";
        in_group(deadline, what, [&](const NcclLibrary& nccl, ncclComm_t comm) {
            const auto on = static_cast<cudaStream_t>(stream);
            for (const Send& send : exchange.sends)
                if (send.bytes > 0) comm_->check(nccl.send(send.data, send.bytes, ncclUint8, send.peer, comm, on), what);
            for (const Receive& receive : exchange.receives)
                if (receive.bytes > 0)
                    comm_->check(nccl.recv(receive.data, receive.bytes, ncclUint8, receive.peer, comm, on), what);
        });
    }

    std::shared_ptr<cuda::Event> watch(void* stream, Clock::time_point deadline, std::string what,
                                       WorkEnd end) override {
        auto event = std::make_shared<cuda::Event>();
        event->record(stream);
        watchdog_->watch(event, deadline, std::move(what), std::move(end));
        return event;
    }

    void on_failure(std::function<void(ddp_status, const std::string&)> report) override {
        std::optional<Failure> missed;
        {
            std::lock_guard lock(report_mutex_);
            report_ = report;
            missed.swap(unreported_);
        }
        if (missed) report(missed->first, missed->second);
    }

private:
    /// One NCCL group with `call` (named `what`) on every non-empty tensor.
    template <typename Call>
    void group_of(std::span<const ddp_tensor> tensors, Clock::time_point deadline, const char* what, Call call) {
        in_group(deadline, what, [&](const NcclLibrary& nccl, ncclComm_t comm) {
            for (const ddp_tensor& t : tensors)
                if (t.count > 0) comm_->check(call(t, nccl, comm), what);
        });
    }

    /// One NCCL group of the calls `body` makes (named `what`).
    template <typename Body>
    void in_group(Clock::time_point deadline, const char* what, Body body) {
        const std::string group_end = std::string("ncclGroupEnd after ") + what;
        try {
            // After this rank's own allocations (fusion_.pack), before its launch.
            if (gate_) gate_->pass(channel_.rank(), deadline, [this] { return stop_reason(); }, what);
            comm_->group([&] { body(comm_->library(), comm_->get()); }, deadline, group_end.c_str());
        } catch (const Error& error) {
            // NCCL may hold part of the group: nothing on this communicator can finish now.
            abort_nccl(error.status(), error.what());
            throw;
        }
    }

    /// group_of over (input, output) pairs: `call` on every pair with a non-empty output.
    template <typename Call>
    void pairs_of(std::span<const ddp_tensor> inputs, std::span<const ddp_tensor> outputs, Clock::time_point deadline,
                  const char* what, Call call) {
        const ddp_tensor* first = inputs.data();
        group_of(outputs, deadline, what, [&](const ddp_tensor& out, const NcclLibrary& nccl, ncclComm_t comm) {
            return call(first[&out - outputs.data()], out, nccl, comm);
        });
    }

    void divide_by_size(std::span<const ddp_tensor> tensors, void* stream) {
        for (const ddp_tensor& t : tensors)
            cuda::divide_on_device(t.data, t.count, dtype_of(t), static_cast<double>(channel_.size()), stream);
    }

    // Fails what the watchdog holds first: aborted kernels end their events
    // as if they had finished.
    void abort_nccl(ddp_status status, const std::string& message) {
        if (gate_) gate_->break_open("rank " + std::to_string(channel_.rank()) + ": " + message);
        watchdog_->fail_all(status, message);
        comm_->abort();
    }

    // For the watchdog: NCCL's asynchronous error, or a peer that stopped
    // taking part (its kernels will never meet this rank's).
    std::optional<Failure> known_failure() {
        if (std::optional<std::string> error = comm_->async_error())
            return Failure{DDP_ERR_BACKEND, "NCCL reported an error: " + *error};
        if (comm_->launch_overdue())
            return Failure{DDP_ERR_TIMEOUT, "NCCL did not return from launching a call within its timeout (a peer "
                                            "is stuck or gone, or NCCL cannot connect the ranks: NCCL_DEBUG=INFO "
                                            "tells more)"};
        const std::optional<AbortNotice> notice = channel_.abort_notice();
        if (notice && notice->reason != AbortNotice::Reason::finalizing)
            return Failure{DDP_ERR_TIMEOUT, "rank " + std::to_string(notice->from_rank) +
                                                " stopped taking part (it gave up, aborted, or its GPU work failed)"};
        return std::nullopt;
    }

    /// Why a rank waiting at the gate stops early: what the watchdog would
    /// report. Not a peer's finalize: the gate follows the call's agreement,
    /// so every rank is in this call or past it, and one that finalizes has
    /// launched it already.
    std::optional<std::string> stop_reason() {
        if (std::optional<Failure> failure = known_failure()) return failure->second;
        if (comm_->aborted()) return "NCCL was aborted on rank " + std::to_string(channel_.rank());
        return std::nullopt;
    }

    // On the watchdog's thread: stop NCCL first, so nothing keeps waiting on the GPU.
    void watchdog_failed(ddp_status status, const std::string& message) {
        comm_->abort();
        std::lock_guard lock(report_mutex_);
        if (report_)
            report_(status, message + "; NCCL was aborted");
        else
            unreported_ = Failure{status, message + "; NCCL was aborted"};  // told once on_failure is set
    }

    ControlChannel& channel_;
    const int device_;
    DeviceFusion fusion_;  // before comm_: its buffer outlives NCCL's use of it
    std::unique_ptr<NcclComm> comm_;
    std::shared_ptr<LaunchGate> gate_;  // null: the only rank of its communicator in this process
    const double timeout_s_;
    std::mutex report_mutex_;
    std::function<void(ddp_status, const std::string&)> report_;  // guarded by report_mutex_
    std::optional<Failure> unreported_;                             // guarded by report_mutex_
    std::unique_ptr<Watchdog> watchdog_;  // last: its thread uses the rest
};

/// What a rank tells its peers before NCCL starts: its GPU's UUID and
/// whether it may share that GPU with another rank.
struct GpuIdentity {
    std::array<uint64_t, 2> uuid{};
    bool may_share = false;
};

/// This rank's GPU identity, or why it cannot run NCCL (every local step
/// that can fail runs here, before the ranks compare notes).
std::optional<Error> local_problem(const cuda::GpuAssignment& gpu, GpuIdentity& identity) {
    try {
        const NcclLibrary& nccl = nccl_library();  // loading errors first: they say what to install
        if (gpu.device < 0)
            fail(DDP_ERR_UNSUPPORTED, "the nccl backend needs a GPU on every rank: " + gpu.unavailable_reason);
        cuda::make_current(gpu.device);
        identity.uuid = cuda::device_uuid(gpu.device);
        identity.may_share =
            nccl.version >= 23000 && env_string("NCCL_MULTI_RANK_GPU_ENABLE").value_or("0") == "1";
        return std::nullopt;
    } catch (const Error& error) {
        return error;
    }
}

/// Refuses ranks that share a GPU unless every rank may share it
/// (NCCL 2.30 or newer with NCCL_MULTI_RANK_GPU_ENABLE=1).
void check_gpus_distinct(ControlChannel& host, const GpuIdentity& mine, double timeout_s) {
    const uint64_t words[3] = {mine.uuid[0], mine.uuid[1], mine.may_share ? 1u : 0u};
    ControlPlane control(host, timeout_s, timeout_s, default_hang_grace_s);
    CallContext context = control.begin(CollectiveKind::barrier, 0);
    std::vector<std::vector<uint64_t>> all;
    control.wait(context, host.start_allgather_u64(words, all), WaitStyle::for_peers);
    bool every_rank_may_share = true;
    for (const auto& rank_words : all) every_rank_may_share = every_rank_may_share && rank_words.at(2) == 1;
    if (every_rank_may_share) return;
    for (size_t a = 0; a < all.size(); ++a)
        for (size_t b = a + 1; b < all.size(); ++b)
            if (all[a][0] == all[b][0] && all[a][1] == all[b][1])
                fail(DDP_ERR_UNSUPPORTED,
                     "ranks " + std::to_string(a) + " and " + std::to_string(b) + " were given the same GPU (UUID " +
                         uuid_text(all[a][0], all[a][1]) +
                         "), which NCCL refuses before 2.30. Start as many ranks per node as it has GPUs (or give "
                         "each rank its own CUDA_VISIBLE_DEVICES), use DDP_BACKEND=mpi (device buffers staged "
                         "through host memory), or NCCL 2.30 or newer on every rank (DDP_NCCL_LIBRARY, e.g. from "
                         "the nvidia-nccl-cu13 wheel) with NCCL_MULTI_RANK_GPU_ENABLE=1");
}

}  // namespace

std::unique_ptr<DevicePlane> make_nccl_plane(Transport& host, const cuda::GpuAssignment& gpu, double timeout_s,
                                             std::shared_ptr<LaunchGate> gate) {
    GpuIdentity identity;
    fail_together(host.channel(), local_problem(gpu, identity), timeout_s, DDP_ERR_UNSUPPORTED,
                  "cannot run the nccl backend (their ddp_init says why), so no rank starts it");
    const NcclLibrary& nccl = nccl_library();
    check_gpus_distinct(host.channel(), identity, timeout_s);

    std::unique_ptr<NcclComm> comm;
    std::optional<Error> setup_error;
    {
        ControlPlane control(host.channel(), timeout_s, timeout_s, default_hang_grace_s);
        CallContext context = control.begin(CollectiveKind::barrier, 0);
        try {
            comm = std::make_unique<NcclComm>(nccl, host.channel(), *host.host_planes().front(), control, context);
            comm->add_launcher(host.channel().rank(), context.deadline, [](ddp_status, const std::string&) {});
        } catch (const Error& error) {
            setup_error = error;
        }
    }
    try {
        fail_together(host.channel(), setup_error, timeout_s, DDP_ERR_BACKEND,
                      "could not set up NCCL (their ddp_init says why), so no rank starts it");
    } catch (const Error&) {
        if (comm) comm->abort();  // this rank's setup succeeded, a peer's did not
        throw;
    }
    if (gate) {
        // Ranks of this process share its CUDA context: no kernel of theirs
        // may load lazily after one of them has launched (cuda.hpp).
        const cuda::DeviceScope on_device(gpu.device);
        cuda::load_copy_kernel();
        cuda::load_divide_kernels();
    }
    return std::make_unique<NcclPlane>(host.channel(), gpu.device, std::move(comm), timeout_s, std::move(gate));
}

}  // namespace ddp
