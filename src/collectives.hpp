// The tensor-list collectives, built once over any Transport: agreement
// first, then the fusion plan, then one backend call per plan step.
// Arguments arrive validated (api.cpp does that).
#pragma once

#include <cstdint>
#include <span>

#include "communicator.hpp"

namespace ddp {

void allreduce_list(Communicator& comm, std::span<const ddp_tensor> tensors, ddp_op op,
                    int64_t fusion_bytes);
void broadcast_list(Communicator& comm, std::span<const ddp_tensor> tensors, int root);
void reduce_list(Communicator& comm, std::span<const ddp_tensor> tensors, ddp_op op, int root);
void sync_optimizer_state(Communicator& comm, std::span<const ddp_tensor> leaves,
                          std::span<double> scalars, int root);
/// True when every tensor is bitwise equal on every rank; otherwise throws
/// nothing but sets `difference` to a sentence naming tensor and ranks.
bool check_replicas(Communicator& comm, std::span<const ddp_tensor> tensors, std::string& difference);
void barrier(Communicator& comm);

/// The fusion size used when neither options nor DDP_FUSION_BYTES give one.
constexpr int64_t default_fusion_bytes = int64_t{1} << 20;

/// Options, then DDP_FUSION_BYTES, then the default (-1: fusion off).
int64_t effective_fusion_bytes(int64_t from_options);

}  // namespace ddp
