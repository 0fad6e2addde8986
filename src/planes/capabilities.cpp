#include "planes/capabilities.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

void lacks(const char* plane, DataOp op) {
    fail(DDP_ERR_UNSUPPORTED, std::string("the ") + plane + " plane does not support " + data_op_name(op));
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
