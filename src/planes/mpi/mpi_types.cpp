#include "planes/mpi/mpi_types.hpp"

#include "device/cpu/elementwise.hpp"
#include "planes/mpi/mpi_check.hpp"

namespace ddp {

namespace {

template <ddp_dtype Dtype, ddp_op Op>
void user_reduction(void* in, void* inout, int* length, MPI_Datatype*) {
    reduce_into(inout, in, *length, Dtype, Op);
}

template <ddp_dtype Dtype>
void create(std::array<MPI_Op, 4>& table) {
    check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_SUM>, 1, &table[0]), "MPI_Op_create");
    check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_PROD>, 1, &table[1]), "MPI_Op_create");
    check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_MIN>, 1, &table[2]), "MPI_Op_create");
    check(MPI_Op_create(&user_reduction<Dtype, DDP_OP_MAX>, 1, &table[3]), "MPI_Op_create");
}

size_t slot(ddp_op op) {
    switch (op) {
    case DDP_OP_SUM: return 0;
    case DDP_OP_PROD: return 1;
    case DDP_OP_MIN: return 2;
    default: return 3;  // MAX; AVG never reaches a plane
    }
}

MPI_Op builtin(ddp_op op) {
    switch (op) {
    case DDP_OP_SUM: return MPI_SUM;
    case DDP_OP_PROD: return MPI_PROD;
    case DDP_OP_MIN: return MPI_MIN;
    default: return MPI_MAX;
    }
}

}  // namespace

MPI_Datatype mpi_type(ddp_dtype dtype) {
    switch (dtype) {
    case DDP_DTYPE_I8: return MPI_INT8_T;
    case DDP_DTYPE_I32: return MPI_INT32_T;
    case DDP_DTYPE_I64: return MPI_INT64_T;
    case DDP_DTYPE_U8: return MPI_UINT8_T;
    case DDP_DTYPE_F32: return MPI_FLOAT;
    case DDP_DTYPE_F64: return MPI_DOUBLE;
    default: return MPI_UINT16_T;  // f16, bf16
    }
}

MpiOps::MpiOps() {
    create<DDP_DTYPE_F16>(f16_);
    create<DDP_DTYPE_BF16>(bf16_);
    create<DDP_DTYPE_F32>(f32_);
    create<DDP_DTYPE_F64>(f64_);
}

MpiOps::~MpiOps() {
    for (auto* table : {&f16_, &bf16_, &f32_, &f64_})
        for (MPI_Op& op : *table)
            if (op != MPI_OP_NULL) MPI_Op_free(&op);
}

MPI_Op MpiOps::get(ddp_dtype dtype, ddp_op op) const {
    const bool min_or_max = op == DDP_OP_MIN || op == DDP_OP_MAX;
    switch (dtype) {
    case DDP_DTYPE_F16: return f16_[slot(op)];
    case DDP_DTYPE_BF16: return bf16_[slot(op)];
    case DDP_DTYPE_F32: return min_or_max ? f32_[slot(op)] : builtin(op);
    case DDP_DTYPE_F64: return min_or_max ? f64_[slot(op)] : builtin(op);
    default: return builtin(op);
    }
}

}  // namespace ddp
