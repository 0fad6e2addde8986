// The one exception type of libddp's internals and the thread-local message
// that the C boundary (api.cpp) hands to ddp_last_error_message().
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "ddp/ddp.h"

namespace ddp {

/// Thrown anywhere inside libddp; api.cpp turns it into a status code.
class Error : public std::runtime_error {
public:
    Error(ddp_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    ddp_status status() const noexcept { return status_; }

private:
    ddp_status status_;
};

[[noreturn]] inline void fail(ddp_status status, const std::string& message) {
    throw Error(status, message);
}

/// Classifies a caught exception: ddp::Error keeps its status, bad_alloc is
/// DDP_ERR_OUT_OF_MEMORY, anything else DDP_ERR_INTERNAL.
ddp_status status_of_exception(std::exception_ptr exception, std::string& message);

/// The calling thread's last error message (see ddp_last_error_message).
void set_last_error(std::string message);
const char* last_error();

}  // namespace ddp
