// What every exported function shares: exceptions become a status code and
// the thread's message (guarded), C handles become what they stand for,
// and outputs are written through checked pointers.
#pragma once

#include <exception>
#include <string>

#include "api/validate.hpp"
#include "core/async_dispatch.hpp"
#include "core/comm_registry.hpp"
#include "core/communicator.hpp"
#include "ddp/ddp.h"
#include "util/error.hpp"

/// The handle behind ddp_request*: a started async call.
struct ddp_request : ddp::Request {};

namespace ddp {

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

/// A ddp_comm* is a core CommHandle (never defined as a C struct).
inline CommHandle* handle_of(ddp_comm* comm) { return reinterpret_cast<CommHandle*>(comm); }
inline const CommHandle* handle_of(const ddp_comm* comm) { return reinterpret_cast<const CommHandle*>(comm); }
inline ddp_comm* c_handle(CommHandle* handle) { return reinterpret_cast<ddp_comm*>(handle); }

/// The handle `comm`, checked to point to one (live or not); `name` is the argument's.
inline CommHandle& checked_handle(ddp_comm* comm, const char* name) {
    CommHandle& handle = require_not_null(handle_of(comm), name);
    if (handle.magic != CommHandle::expected_magic)
        fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + " does not point to a ddp_comm");
    return handle;
}

/// The live communicator behind `comm`.
inline Communicator& live_comm(const ddp_comm* comm) {
    const CommHandle* handle = handle_of(comm);
    if (handle == nullptr) fail(DDP_ERR_INVALID_ARGUMENT, "comm is NULL (call ddp_init first)");
    if (handle->magic != CommHandle::expected_magic) fail(DDP_ERR_INVALID_ARGUMENT, "comm does not point to a ddp_comm");
    if (!handle->live)
        fail(DDP_ERR_NOT_INITIALIZED, handle->world == nullptr
                                          ? "comm was finalized"
                                          : "comm is a sub-communicator that was freed (ddp_comm_free) or whose "
                                            "world was finalized (ddp_finalize)");
    return *handle->live;
}

template <typename T>
void set_output(T* out, T value, const char* name) {
    require_not_null(out, name) = value;
}

}  // namespace ddp
