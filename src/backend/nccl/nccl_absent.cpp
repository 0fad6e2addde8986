// The nccl backend in a libddp built without CUDA or without nccl.h.
#include "backend/nccl/nccl_backend.hpp"
#include "util/error.hpp"

namespace ddp {

std::unique_ptr<Backend> make_nccl_backend(std::unique_ptr<Backend>& host, const cuda::GpuAssignment&, double) {
    fail(DDP_ERR_UNSUPPORTED, "rank " + std::to_string(host->rank()) +
                                  ": the nccl backend is not in this libddp: it was built without CUDA or without "
                                  "nccl.h (rebuild with -Dcuda=enabled -Dnccl=enabled)");
}

}  // namespace ddp
