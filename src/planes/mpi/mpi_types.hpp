// libddp's dtypes and reductions as MPI's. MPI has no 16-bit float types,
// and its MIN/MAX on floats return whichever operand the comparison picks
// when one is NaN: those reductions use user-defined operations over
// libddp's own element-wise code.
#pragma once

#include <mpi.h>

#include <array>

#include "ddp/ddp.h"

namespace ddp {

MPI_Datatype mpi_type(ddp_dtype dtype);

/// The MPI operations for each (dtype, reduction); made at set-up, freed
/// while MPI still runs.
class MpiOps {
public:
    MpiOps();
    ~MpiOps();
    MpiOps(const MpiOps&) = delete;
    MpiOps& operator=(const MpiOps&) = delete;

    /// The operation for `op` (SUM, PROD, MIN or MAX) on `dtype`.
    MPI_Op get(ddp_dtype dtype, ddp_op op) const;

private:
    using Table = std::array<MPI_Op, 4>;  // SUM, PROD, MIN, MAX
    Table f16_{}, bf16_{}, f32_{}, f64_{};
};

}  // namespace ddp
