// NCCL, loaded at run time (as XLA, XGBoost and CuPy do) instead of linked:
// one libddp binary loads and runs its CPU paths on machines without NCCL,
// and DDP_NCCL_LIBRARY can pick another NCCL (the nvidia-nccl-cu13 wheel's)
// than the system's. Only the types come from nccl.h at build time.
#pragma once

#include <nccl.h>

#include <string>

namespace ddp {

/// The oldest NCCL libddp accepts: non-blocking communicator setup
/// (ncclCommInitRankConfig with config.blocking = 0) and ncclGetLastError.
inline constexpr int oldest_nccl_version = 21800;  // 2.18.0

/// The NCCL functions libddp calls, resolved from one loaded library.
struct NcclLibrary {
    std::string path;  ///< what was loaded (DDP_NCCL_LIBRARY or libnccl.so.2)
    int version = 0;   ///< ncclGetVersion's code, e.g. 22809 for 2.28.9
    decltype(&ncclGetVersion) get_version = nullptr;
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
    decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
    decltype(&ncclCommFinalize) comm_finalize = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclCommAbort) comm_abort = nullptr;
    decltype(&ncclGetErrorString) get_error_string = nullptr;
    decltype(&ncclGetLastError) get_last_error = nullptr;
    decltype(&ncclGroupStart) group_start = nullptr;
    decltype(&ncclGroupEnd) group_end = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclReduce) reduce = nullptr;
    decltype(&ncclBroadcast) broadcast = nullptr;
    decltype(&ncclAllGather) all_gather = nullptr;
    decltype(&ncclReduceScatter) reduce_scatter = nullptr;
    decltype(&ncclSend) send = nullptr;
    decltype(&ncclRecv) recv = nullptr;
    /// nullptr when this NCCL lacks it (ncclCommSplit came in 2.18.1):
    /// only ddp_comm_split needs it.
    decltype(&ncclCommSplit) comm_split = nullptr;

    /// "2.28.9"
    std::string version_text() const;
    /// NCCL's description of `result`, with its last error message for `comm`.
    std::string describe(ncclResult_t result, ncclComm_t comm) const;
};

/// The process's NCCL, loaded on first use and kept. Throws
/// DDP_ERR_UNSUPPORTED saying exactly what failed: not found (with dlopen's
/// reason and where to get NCCL), a missing function, a version older than
/// oldest_nccl_version.
const NcclLibrary& nccl_library();

}  // namespace ddp
