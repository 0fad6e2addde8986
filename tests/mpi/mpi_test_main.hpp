// GoogleTest under mpirun: every rank runs every test in the same order (the
// tests issue collectives), rank 0 prints the full report and the other
// ranks print only their failures.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ddp/ddp.h"

namespace mpi_test {

inline ddp_comm* world = nullptr;
inline int32_t rank = 0;
inline int32_t size = 1;

inline std::string message() { return ddp_last_error_message(); }

inline void start(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    if (ddp_init(nullptr, &world) != DDP_OK) {
        fprintf(stderr, "ddp_init failed: %s\n", ddp_last_error_message());
        exit(2);
    }
    ddp_rank(world, &rank);
    ddp_size(world, &size);
    if (rank != 0) testing::GTEST_FLAG(brief) = true;
}

}  // namespace mpi_test
