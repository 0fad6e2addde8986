// What a host plane lacks, it says (c10d's model). Its table claims only
// what it implements, so these are reached only by a table that claims too
// much.
#include "planes/host_plane.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

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

std::unique_ptr<Pending> HostPlane::start_alltoall(const void*, void*, int64_t, ddp_dtype) {
    unsupported(*this, DataOp::alltoall);
}

}  // namespace ddp
