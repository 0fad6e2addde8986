// What a plane implements, as a table next to its code (NCCL's transports
// are one table, each saying what it can connect). A step goes to a plane
// only when a row of that plane's table covers it; nothing is claimed by
// default, so a data operation added later is passed on by every plane
// whose table does not list it, and a plane lists only what it implements.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "ddp/ddp.h"

namespace ddp {

/// The data movements a plane may offer; every collective's data phase is
/// made of these (AVG is SUM followed by a division, done above the host
/// planes). `exchange` is point to point (planes/exchange.hpp): what is
/// made of sends and receives is written once above the planes.
enum class DataOp { allreduce, reduce, broadcast, allgather, reduce_scatter, exchange };

/// "allreduce", ... for messages.
constexpr const char* data_op_name(DataOp op) {
    switch (op) {
    case DataOp::allreduce: return "allreduce";
    case DataOp::reduce: return "reduce";
    case DataOp::broadcast: return "broadcast";
    case DataOp::allgather: return "allgather";
    case DataOp::reduce_scatter: return "reduce_scatter";
    case DataOp::exchange: return "exchange";
    }
    return "an unknown operation";
}

/// Whether `op` combines the ranks' values (and so is asked with a reduction).
bool reduces(DataOp op);

/// Where a step's buffers lie.
enum class Memory { host, device };

/// Each value's bit in a Set; a value outside its enum has none.
constexpr int bit_of(DataOp op) { return static_cast<int>(op); }
constexpr int bit_of(ddp_op op) { return static_cast<int>(op); }
constexpr int bit_of(ddp_dtype dtype) {
    switch (dtype) {
    case DDP_DTYPE_I8: return 0;
    case DDP_DTYPE_I32: return 1;
    case DDP_DTYPE_I64: return 2;
    case DDP_DTYPE_U8: return 3;
    case DDP_DTYPE_F16: return 4;
    case DDP_DTYPE_F32: return 5;
    case DDP_DTYPE_F64: return 6;
    case DDP_DTYPE_BF16: return 7;
    }
    return -1;
}

/// A set of enum values, written as the list of its members.
template <typename T>
class Set {
public:
    constexpr Set(std::initializer_list<T> members) {
        for (T member : members) bits_ |= uint64_t{1} << bit_of(member);
    }
    constexpr bool has(T value) const {
        const int bit = bit_of(value);
        return bit >= 0 && bit < 64 && ((bits_ >> bit) & 1) != 0;
    }

private:
    uint64_t bits_ = 0;
};

inline constexpr Set<ddp_dtype> every_dtype{DDP_DTYPE_I8,  DDP_DTYPE_I32, DDP_DTYPE_I64, DDP_DTYPE_U8,
                                            DDP_DTYPE_F16, DDP_DTYPE_F32, DDP_DTYPE_F64, DDP_DTYPE_BF16};
inline constexpr Set<ddp_dtype> integer_dtypes{DDP_DTYPE_I8, DDP_DTYPE_I32, DDP_DTYPE_I64, DDP_DTYPE_U8};
/// What a host plane is asked to reduce with (AVG arrives there as SUM).
inline constexpr Set<ddp_op> host_reductions{DDP_OP_SUM, DDP_OP_MIN, DDP_OP_MAX, DDP_OP_PROD};

/// One row of a plane's table: it runs each of `ops` on buffers in
/// `memory` of each of `dtypes`, reduced (for the ops that reduce) with
/// each of `reductions`, from `min_bytes` up.
struct Capability {
    Set<DataOp> ops;
    Set<ddp_dtype> dtypes = every_dtype;
    Set<ddp_op> reductions = host_reductions;
    Memory memory = Memory::host;
    int64_t min_bytes = 0;
};

/// Refuses `op` on the plane named `plane` (DDP_ERR_UNSUPPORTED): what a
/// plane lacks, it says (c10d's model). Its table claims only what it
/// implements, so this is reached only by a table that claims too much.
[[noreturn]] void lacks(const char* plane, DataOp op);

/// Whether a row of `table` covers the step.
bool covers(std::span<const Capability> table, DataOp op, ddp_dtype dtype, ddp_op reduction, Memory memory,
            int64_t bytes);

}  // namespace ddp
