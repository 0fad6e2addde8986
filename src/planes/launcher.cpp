#include <cstdlib>

#include "planes/transport.hpp"

namespace ddp {

// The variables that Open MPI's mpirun, MPICH's Hydra and PMIx launchers
// (srun --mpi=pmix, prterun) set in every process they start.
bool launched_by_mpi_launcher() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (std::getenv(name) != nullptr) return true;
    return false;
}

}  // namespace ddp
