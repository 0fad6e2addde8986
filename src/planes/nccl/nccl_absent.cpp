// The nccl plane in a libddp built without CUDA or without nccl.h.
#include "planes/nccl/nccl_plane.hpp"
#include "util/error.hpp"

namespace ddp {

std::unique_ptr<DevicePlane> make_nccl_plane(Transport& host, const cuda::GpuAssignment&, double,
                                             std::shared_ptr<LaunchGate>) {
    fail(DDP_ERR_UNSUPPORTED, "rank " + std::to_string(host.channel().rank()) +
                                  ": the nccl backend is not in this libddp: it was built without CUDA or without "
                                  "nccl.h (rebuild with -Dcuda=enabled -Dnccl=enabled)");
}

}  // namespace ddp
