#include "planes/factory.hpp"

namespace ddp {

std::unique_ptr<Transport> make_transport(ddp_backend choice, int64_t mpi_comm_fortran) {
    switch (choice) {
    case DDP_BACKEND_MPI: return make_mpi_transport(mpi_comm_fortran);
    case DDP_BACKEND_NCCL: return mpi_launch_detected() ? make_mpi_transport(mpi_comm_fortran) : make_self_transport();
    default: return make_self_transport();
    }
}

}  // namespace ddp
