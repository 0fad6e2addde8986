//! Adopting an MPI communicator by its Fortran handle, as an rsmpi program
//! would: MPI is initialized by the program (here through libmpi directly),
//! libddp duplicates MPI_COMM_WORLD's handle, and MPI is finalized after the
//! Comm is dropped. Run under `mpirun -np N`.
mod mpi_harness;

use std::os::raw::{c_char, c_int, c_void};

use ddp::{Comm, InitOptions, Op};

#[link(name = "mpi")]
extern "C" {
    static ompi_mpi_comm_world: c_void;
    fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int;
    fn MPI_Finalize() -> c_int;
    fn MPI_Comm_c2f(comm: *const c_void) -> c_int;
}

fn adopted_world_reduces(&handle: &i64) {
    let comm = Comm::init_with(&InitOptions { mpi_comm_fortran: Some(handle), ..Default::default() }).unwrap();
    assert_eq!(comm.backend_name(), "mpi");
    let size = comm.size();
    let mut data = vec![1.0f32; 4];
    comm.allreduce(&mut [&mut data], Op::Sum).unwrap();
    assert_eq!(data, vec![size as f32; 4]);
}

fn unknown_handle_is_an_error(&handle: &i64) {
    let err =
        Comm::init_with(&InitOptions { mpi_comm_fortran: Some(handle + 100_000), ..Default::default() }).unwrap_err();
    assert_eq!(err.kind(), ddp::ErrorKind::InvalidArgument, "{err}");
    assert!(err.message().contains("mpi_comm_fortran"), "{err}");
}

fn main() {
    // SAFETY: plain MPI calls on the main thread, before and after libddp.
    let handle = unsafe {
        assert_eq!(MPI_Init(std::ptr::null_mut(), std::ptr::null_mut()), 0);
        i64::from(MPI_Comm_c2f(&ompi_mpi_comm_world))
    };
    let tests: [(&str, fn(&i64)); 2] =
        [("adopted_world_reduces", adopted_world_reduces), ("unknown_handle_is_an_error", unknown_handle_is_an_error)];
    let status = mpi_harness::run(&handle, &tests);
    unsafe { MPI_Finalize() };
    std::process::exit(status);
}
