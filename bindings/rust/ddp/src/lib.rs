//! Safe Rust bindings to libddp, the communication core of data-parallel
//! training: allreduce of whole lists of gradient tensors (small ones fused),
//! broadcast of parameters and optimizer state, replica checks and data set
//! sharding, over MPI or on one process.
//!
//! Every call returns [`Result`]; a rank that passes a different list, dtype,
//! length, op or root makes every rank's call return an [`Error`] of kind
//! [`ErrorKind::Mismatch`] instead of hanging.
//!
//! ```
//! use ddp::{Comm, Op, Sampler};
//!
//! let comm = Comm::init()?;                        // MPI under mpirun, else one process
//! let mut weights = vec![0.1f32; 64];
//! let mut bias = vec![0.0f32; 8];
//! comm.broadcast(&mut [&mut weights, &mut bias], 0)?;
//! let mut sampler = Sampler::new(&comm, 1000)?.seed(1);
//! for epoch in 0..2 {
//!     sampler.set_epoch(epoch);
//!     for _index in sampler.iter()? { /* accumulate gradients */ }
//!     comm.allreduce(&mut [&mut weights, &mut bias], Op::Avg)?;
//! }
//! assert!(comm.check_replicas(&[&mut weights, &mut bias])?.is_identical());
//! # Ok::<(), ddp::Error>(())
//! ```
#![warn(missing_docs)]

mod comm;
mod element;
mod error;
pub mod logging;
mod scope;
mod shard;
mod tensors;
mod timeline;

pub use comm::{Backend, CollectiveOptions, Comm, InitOptions, LogLevel, Op, Replicas};
pub use element::Element;
pub use error::{Error, ErrorKind, Result};
pub use half;
pub use scope::{Request, Scope};
pub use shard::{shard_count, shard_indices, Indices, Sampler, ShardOptions, Strategy};
pub use tensors::{BorrowedBuffer, BorrowedTensors, Buffer, TensorList, Tensors, View, Views};
pub use timeline::Timeline;

/// The run-time library's version, `"major.minor.patch"`.
///
/// ```
/// assert!(ddp::version().starts_with("1."));
/// ```
pub fn version() -> &'static str {
    // SAFETY: a static string.
    unsafe { std::ffi::CStr::from_ptr(ddp_sys::ddp_version_string()) }.to_str().unwrap_or("?")
}
