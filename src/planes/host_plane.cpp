// What a host plane lacks, it says (c10d's model): a new collective is added
// to the planes that can run it, and the others refuse it by default.
#include "planes/host_plane.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

const char* data_op_name(DataOp op) {
    switch (op) {
    case DataOp::allreduce: return "allreduce";
    case DataOp::reduce: return "reduce";
    case DataOp::broadcast: return "broadcast";
    case DataOp::allgather: return "allgather";
    case DataOp::reduce_scatter: return "reduce_scatter";
    }
    return "an unknown operation";
}

namespace {

[[noreturn]] void unsupported(const HostPlane& plane, DataOp op) {
    fail(DDP_ERR_UNSUPPORTED, std::string("the ") + plane.name() + " plane does not support " + data_op_name(op));
}

}  // namespace

std::unique_ptr<Pending> HostPlane::start_allreduce(void*, int64_t, ddp_dtype, ddp_op) {
    unsupported(*this, DataOp::allreduce);
}

std::unique_ptr<Pending> HostPlane::start_allreduce_pieces(std::span<const Piece>, int64_t, ddp_dtype, ddp_op) {
    unsupported(*this, DataOp::allreduce);
}

std::unique_ptr<Pending> HostPlane::start_reduce(void*, int64_t, ddp_dtype, ddp_op, int) {
    unsupported(*this, DataOp::reduce);
}

std::unique_ptr<Pending> HostPlane::start_broadcast(void*, int64_t, int) { unsupported(*this, DataOp::broadcast); }

std::unique_ptr<Pending> HostPlane::start_allgather(const void*, void*, int64_t, ddp_dtype) {
    unsupported(*this, DataOp::allgather);
}

std::unique_ptr<Pending> HostPlane::start_reduce_scatter(const void*, void*, int64_t, ddp_dtype, ddp_op) {
    unsupported(*this, DataOp::reduce_scatter);
}

}  // namespace ddp
