// What a device plane lacks, it says (c10d's model).
#include "planes/device_plane.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

namespace {

[[noreturn]] void unsupported(const DevicePlane& plane, DataOp op) {
    fail(DDP_ERR_UNSUPPORTED, std::string("the ") + plane.name() + " plane does not support " + data_op_name(op));
}

}  // namespace

void DevicePlane::allreduce(std::span<const ddp_tensor>, ddp_op, void*, Clock::time_point) {
    unsupported(*this, DataOp::allreduce);
}

void DevicePlane::reduce(std::span<const ddp_tensor>, ddp_op, int, void*, Clock::time_point) {
    unsupported(*this, DataOp::reduce);
}

void DevicePlane::broadcast(std::span<const ddp_tensor>, int, void*, Clock::time_point) {
    unsupported(*this, DataOp::broadcast);
}

void DevicePlane::allgather(std::span<const ddp_tensor>, std::span<const ddp_tensor>, void*, Clock::time_point) {
    unsupported(*this, DataOp::allgather);
}

void DevicePlane::reduce_scatter(std::span<const ddp_tensor>, std::span<const ddp_tensor>, ddp_op, void*,
                                 Clock::time_point) {
    unsupported(*this, DataOp::reduce_scatter);
}

void DevicePlane::alltoall(std::span<const ddp_tensor>, std::span<const ddp_tensor>, void*, Clock::time_point) {
    unsupported(*this, DataOp::alltoall);
}

}  // namespace ddp
