// A bad environment variable on one rank only (DDP_FUSION_BYTES=bogus, or
// the variable and value given as arguments): ddp_init fails on every rank
// at once (the bad rank naming the variable, the others naming the bad
// rank), where 0.1 let the bad rank's broadcast fail alone and its peer
// wait for the whole timeout. Run with 2 ranks; exits 0 when every check passed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ddp/ddp.h"

int main(int argc, char** argv) {
    const std::string variable = argc > 2 ? argv[1] : "DDP_FUSION_BYTES";
    const std::string value = argc > 2 ? argv[2] : "bogus";
    const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
    const int rank = rank_text != nullptr ? std::atoi(rank_text) : 0;
    if (rank == 1) setenv(variable.c_str(), value.c_str(), 1);
    const auto started = std::chrono::steady_clock::now();
    ddp_comm* world = nullptr;
    const ddp_status status = ddp_init(nullptr, &world);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::string message = ddp_last_error_message();
    const bool right = rank == 1 ? status == DDP_ERR_INVALID_ARGUMENT &&
                                       message.find("rank 1: " + variable + "='" + value + "'") != std::string::npos
                                 : status == DDP_ERR_MISMATCH && message.find("rank(s) 1") != std::string::npos;
    std::printf("rank %d: %s in %.2f s: %s\n", rank, ddp_status_name(status), seconds, message.c_str());
    return right && seconds < 5 ? 0 : 1;
}
