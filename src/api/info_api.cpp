// The exported calls that describe: status names and the last error,
// the version, the options structs' defaults, a communicator's rank, size,
// device and backend, and the log.
#include "api/boundary.hpp"
#include "api/options.hpp"
#include "api/validate.hpp"
#include "util/log.hpp"

using namespace ddp;

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

}  // extern "C"
