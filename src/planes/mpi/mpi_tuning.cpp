#include "planes/mpi/mpi_tuning.hpp"

#include <mpi.h>

#include <cstdlib>

namespace ddp {

void choose_nonblocking_allreduce_algorithm(int thread_level) {
    constexpr const char* variable = "coll_libnbc_iallreduce_algorithm";
    constexpr int rabenseifner = 3;
    if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr) return;
    int provided = 0;
    if (MPI_T_init_thread(thread_level, &provided) != MPI_SUCCESS) return;
    int index = 0, count = 0, current = -1;
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_get_index(variable, &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
        if (count == 1 && MPI_T_cvar_read(handle, &current) == MPI_SUCCESS && current == 0)
            MPI_T_cvar_write(handle, &rabenseifner);
        MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
}

}  // namespace ddp
