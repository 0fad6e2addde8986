#include "planes/nccl/nccl_library.hpp"

#include <dlfcn.h>

#include <mutex>
#include <optional>

#include "util/env.hpp"
#include "util/error.hpp"

namespace ddp {

namespace {

constexpr const char* default_library = "libnccl.so.2";

template <typename Function>
void resolve(void* handle, const std::string& path, const char* name, Function& out) {
    out = reinterpret_cast<Function>(dlsym(handle, name));
    if (out == nullptr)
        fail(DDP_ERR_UNSUPPORTED, path + " has no function " + name +
                                      ": it is not NCCL, or an NCCL older than 2.18 (libddp needs 2.18 or newer)");
}

NcclLibrary load(const std::string& path) {
    dlerror();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* reason = dlerror();
        fail(DDP_ERR_UNSUPPORTED,
             "NCCL could not be loaded: dlopen(\"" + path + "\") failed (" + (reason ? reason : "no reason given") +
                 "). Install NCCL (Debian: libnccl2; PyPI: nvidia-nccl-cu13) or set DDP_NCCL_LIBRARY to the "
                 "path of libnccl.so.2");
    }
    // Kept loaded for the life of the process, as NCCL's own threads may
    // outlive any communicator.
    NcclLibrary library;
    library.path = path;
    resolve(handle, path, "ncclGetVersion", library.get_version);
    resolve(handle, path, "ncclGetUniqueId", library.get_unique_id);
    resolve(handle, path, "ncclCommInitRankConfig", library.comm_init_rank_config);
    resolve(handle, path, "ncclCommGetAsyncError", library.comm_get_async_error);
    resolve(handle, path, "ncclCommFinalize", library.comm_finalize);
    resolve(handle, path, "ncclCommDestroy", library.comm_destroy);
    resolve(handle, path, "ncclCommAbort", library.comm_abort);
    resolve(handle, path, "ncclGetErrorString", library.get_error_string);
    resolve(handle, path, "ncclGetLastError", library.get_last_error);
    resolve(handle, path, "ncclGroupStart", library.group_start);
    resolve(handle, path, "ncclGroupEnd", library.group_end);
    resolve(handle, path, "ncclAllReduce", library.all_reduce);
    resolve(handle, path, "ncclReduce", library.reduce);
    resolve(handle, path, "ncclBroadcast", library.broadcast);
    resolve(handle, path, "ncclAllGather", library.all_gather);
    resolve(handle, path, "ncclReduceScatter", library.reduce_scatter);
    resolve(handle, path, "ncclSend", library.send);
    resolve(handle, path, "ncclRecv", library.recv);
    library.comm_split = reinterpret_cast<decltype(&ncclCommSplit)>(dlsym(handle, "ncclCommSplit"));
    if (library.get_version(&library.version) != ncclSuccess)
        fail(DDP_ERR_UNSUPPORTED, path + ": ncclGetVersion failed");
    if (library.version < oldest_nccl_version)
        fail(DDP_ERR_UNSUPPORTED, path + " is NCCL " + library.version_text() +
                                      " but libddp needs NCCL 2.18 or newer (set DDP_NCCL_LIBRARY to a newer "
                                      "libnccl.so.2, e.g. from the nvidia-nccl-cu13 wheel)");
    return library;
}

}  // namespace

std::string NcclLibrary::version_text() const {
    // Codes since 2.9 are major * 10000 + minor * 100 + patch.
    return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
           std::to_string(version % 100);
}

std::string NcclLibrary::describe(ncclResult_t result, ncclComm_t comm) const {
    std::string text = get_error_string(result);
    const char* last = get_last_error(comm);
    if (last != nullptr && *last != '\0') text += ": " + std::string(last);
    return text;
}

const NcclLibrary& nccl_library() {
    static std::mutex mutex;
    static std::optional<NcclLibrary> loaded;
    std::lock_guard lock(mutex);
    if (!loaded) {
        loaded = load(env_string("DDP_NCCL_LIBRARY").value_or(default_library));
    }
    return *loaded;
}

}  // namespace ddp
