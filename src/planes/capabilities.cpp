#include "planes/capabilities.hpp"

namespace ddp {

const char* data_op_name(DataOp op) {
    switch (op) {
    case DataOp::allreduce: return "allreduce";
    case DataOp::reduce: return "reduce";
    case DataOp::broadcast: return "broadcast";
    case DataOp::allgather: return "allgather";
    case DataOp::reduce_scatter: return "reduce_scatter";
    case DataOp::alltoall: return "alltoall";
    }
    return "an unknown operation";
}

bool reduces(DataOp op) { return op == DataOp::allreduce || op == DataOp::reduce || op == DataOp::reduce_scatter; }

bool covers(std::span<const Capability> table, DataOp op, ddp_dtype dtype, ddp_op reduction, Memory memory,
            int64_t bytes) {
    for (const Capability& row : table)
        if (row.ops.has(op) && row.dtypes.has(dtype) && (!reduces(op) || row.reductions.has(reduction)) &&
            row.memory == memory && bytes >= row.min_bytes)
            return true;
    return false;
}

}  // namespace ddp
