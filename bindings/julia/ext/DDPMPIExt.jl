"""
Adopting an MPI.jl communicator: libddp duplicates it through its Fortran handle, so
its own traffic never meets the program's. MPI.jl must use the same MPI library as
libddp (MPIPreferences.use_system_binary(); see the README).
"""
module DDPMPIExt

using MPI: MPI
using DDP: DDP

"""
    DDP.Init(comm::MPI.Comm; backend = :mpi, kwargs...)

Starts libddp on a duplicate of `comm` (`MPI.COMM_WORLD` or a subcommunicator).
The program keeps MPI initialized until after `DDP.Finalize()`; initialize it with
`MPI.Init(threadlevel = :multiple)` for `Iallreduce!`.
"""
function DDP.Init(comm::MPI.Comm; backend::Symbol = :mpi, kwargs...)
    MPI.Initialized() || throw(ArgumentError("MPI.Init() first: an MPI.Comm needs MPI initialized"))
    return DDP.Init(; backend, mpi_comm_fortran = MPI.API.MPI_Comm_c2f(comm), kwargs...)
end

end # module
