#include "backend/nccl/nccl_backend.hpp"

#include <string>

#include "util/error.hpp"

#if DDP_WITH_NCCL
#include <nccl.h>
#endif

namespace ddp {

std::unique_ptr<Backend> make_nccl_backend() {
#if DDP_WITH_NCCL
    int version = 0;
    ncclGetVersion(&version);
    fail(DDP_ERR_UNSUPPORTED, "the nccl backend is not implemented in this version of libddp "
                              "(built against NCCL " + std::to_string(version) +
                              "); use DDP_BACKEND=mpi with host buffers");
#else
    fail(DDP_ERR_UNSUPPORTED, "the nccl backend is not available: libddp was built without NCCL "
                              "(-Dnccl=disabled), and is not implemented in this version");
#endif
}

}  // namespace ddp
