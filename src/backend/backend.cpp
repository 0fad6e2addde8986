// What a backend lacks, it says (c10d's model): a new collective is added
// to the backends that can run it, and the others refuse it by default.
#include "backend/backend.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

namespace {

[[noreturn]] void unsupported(const Backend& backend, const char* collective) {
    fail(DDP_ERR_UNSUPPORTED, std::string("the ") + backend.name() + " backend does not support " + collective);
}

}  // namespace

std::unique_ptr<Pending> Backend::start_allgather(const void*, void*, int64_t, ddp_dtype) {
    unsupported(*this, "allgather");
}

std::unique_ptr<Pending> Backend::start_reduce_scatter(const void*, void*, int64_t, ddp_dtype, ddp_op) {
    unsupported(*this, "reduce_scatter");
}

}  // namespace ddp
