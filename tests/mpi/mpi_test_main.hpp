// GoogleTest under mpirun: every rank runs every test in the same order (the
// tests issue collectives), rank 0 prints the full report and the other
// ranks print only their failures.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "ddp/ddp.h"

namespace mpi_test {

/// Every dtype libddp takes, for tests that cover them all.
inline constexpr ddp_dtype all_dtypes[] = {DDP_DTYPE_I8,  DDP_DTYPE_I32, DDP_DTYPE_I64, DDP_DTYPE_U8,
                                           DDP_DTYPE_F16, DDP_DTYPE_F32, DDP_DTYPE_F64, DDP_DTYPE_BF16};

inline int32_t rank = 0;
inline int32_t size = 1;

class FailurePrinter : public testing::EmptyTestEventListener {
    void OnTestPartResult(const testing::TestPartResult& result) override {
        if (result.failed())
            fprintf(stderr, "[rank %d] %s:%d: %s\n", rank, result.file_name() ? result.file_name() : "?",
                    result.line_number(), result.summary());
    }
};

inline ddp_comm* world = nullptr;

inline std::string message() { return ddp_last_error_message(); }

inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline void start(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    if (ddp_init(nullptr, &world) != DDP_OK) {
        fprintf(stderr, "ddp_init failed: %s\n", ddp_last_error_message());
        exit(2);
    }
    ddp_rank(world, &rank);
    ddp_size(world, &size);
    if (rank != 0) {
        // Other ranks report failures only, so the log reads as one run.
        auto& listeners = testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new FailurePrinter);
    }
}

}  // namespace mpi_test
