// The defaults of every options struct, in one place.
#pragma once

#include "ddp/ddp.h"

namespace ddp {

inline ddp_init_options default_init_options() {
    ddp_init_options opts{};
    opts.struct_size = sizeof opts;
    opts.backend = DDP_BACKEND_AUTO;
    opts.mpi_comm_fortran = DDP_NO_MPI_COMM;
    opts.timeout_s = 0;
    opts.hang_watchdog_s = 0;
    return opts;
}

inline ddp_collective_options default_collective_options() {
    ddp_collective_options opts{};
    opts.struct_size = sizeof opts;
    opts.fusion_bytes = 0;
    opts.timeout_s = 0;
    opts.cuda_stream = nullptr;  // the legacy default stream
    opts.names = nullptr;
    opts.for_binding = 0;
    return opts;
}

inline ddp_shard_options default_shard_options() {
    ddp_shard_options opts{};
    opts.struct_size = sizeof opts;
    opts.shuffle = 1;
    opts.seed = 0;
    opts.epoch = 0;
    opts.drop_last = 0;
    opts.strategy = DDP_SHARD_STRIDED;
    return opts;
}

inline ddp_split_options default_split_options() {
    ddp_split_options opts{};
    opts.struct_size = sizeof opts;
    opts.timeout_s = 0;  // the parent's
    return opts;
}

}  // namespace ddp
