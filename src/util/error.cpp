#include "util/error.hpp"

#include <new>

namespace ddp {

namespace {
thread_local std::string last_error_message;
}

ddp_status status_of_exception(std::exception_ptr exception, std::string& message) {
    try {
        std::rethrow_exception(exception);
    } catch (const Error& error) {
        message = error.what();
        return error.status();
    } catch (const std::bad_alloc&) {
        message = "out of memory (a fusion buffer or a request could not be allocated)";
        return DDP_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& error) {
        message = std::string("internal error: ") + error.what();
        return DDP_ERR_INTERNAL;
    } catch (...) {
        message = "internal error: an unknown exception";
        return DDP_ERR_INTERNAL;
    }
}

void set_last_error(std::string message) { last_error_message = std::move(message); }

const char* last_error() { return last_error_message.c_str(); }

}  // namespace ddp
