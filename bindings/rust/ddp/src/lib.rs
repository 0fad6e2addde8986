//! Safe Rust bindings to libddp, the communication core of data-parallel
//! training: allreduce of whole lists of gradient tensors (small ones fused),
//! broadcast of parameters and optimizer state, replica checks and data set
//! sharding, over MPI or on one process.
//!
//! Every call returns [`Result`]; a rank that passes a different list, dtype,
//! length, op or root makes every rank's call return an [`Error`] of kind
//! [`ErrorKind::Mismatch`] instead of hanging, and a rank whose own input is
//! invalid gets its error while every peer gets one naming it.
//!
//! A training loop reduces its gradients with a [`Reducer`] (gradients
//! computed straight into its buckets, each bucket reduced while the rest is
//! computed); [`Comm::with`] gives any collective options for that call only
//! ([`CollectiveOptions`]); [`Comm::split`] gives a sub-communicator
//! ([`SubComm`]) with every call of the world; [`DeviceSlice`] passes GPU memory, which the
//! `nccl` backend ([`Backend::Nccl`]) reduces on the GPUs. Building a crate of
//! your own against this one: see `docs/rust.md` in the libddp repository.
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

mod collectives;
mod comm;
mod element;
mod error;
pub mod logging;
mod options;
mod reducer;
mod scope;
mod shard;
mod split;
mod tensors;
mod timeline;

pub use collectives::{Collectives, Replicas};
pub use comm::{Backend, Comm, HangWatchdog, InitOptions, LogLevel, Op};
pub use element::Element;
pub use error::{Error, ErrorKind, Result};
pub use half;
pub use options::CollectiveOptions;
pub use reducer::{Gradient, Reducer, Step};
pub use scope::{Request, Scope};
pub use shard::{shard_count, shard_indices, Indices, Sampler, ShardOptions, Strategy};
pub use split::{SplitOptions, SubComm};
pub use tensors::{
    BorrowedBuffer, BorrowedTensors, BorrowedView, BorrowedViews, Buffer, DeviceSlice, TensorList, Tensors, View, Views,
};
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
