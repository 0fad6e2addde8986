// The nccl backend's entry point. It is not implemented in this version;
// asking for it says so, and which NCCL this build found.
#pragma once

#include <memory>

#include "backend/backend.hpp"

namespace ddp {

std::unique_ptr<Backend> make_nccl_backend();

}  // namespace ddp
