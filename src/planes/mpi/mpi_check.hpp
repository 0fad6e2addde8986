// Turns an MPI return code into ddp::Error (DDP_ERR_BACKEND with MPI's text).
#pragma once

#include <mpi.h>

#include <string>

#include "util/error.hpp"

namespace ddp {

inline void check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail(DDP_ERR_BACKEND, std::string(call) + " failed: " + std::string(text, length));
}

}  // namespace ddp
