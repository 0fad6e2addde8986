//! The communicator: init, queries, blocking collectives, finalize on drop.
use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr;

use ddp_sys::{ddp_backend, ddp_collective_options, ddp_comm, ddp_init_options, ddp_log_level, ddp_op};

use crate::error::{check, last_error_message};
use crate::{Error, Result, Tensors, Views};

/// A reduction. There is no default in the C API; where this crate lets the
/// op default (nowhere yet) it is `Sum`, as in MPI and torch.distributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Element-wise sum (integers wrap around).
    Sum,
    /// Sum divided by the world size; floating dtypes only.
    Avg,
    /// Element-wise minimum (NaN wins).
    Min,
    /// Element-wise maximum (NaN wins).
    Max,
    /// Element-wise product.
    Prod,
}

impl Op {
    pub(crate) fn raw(self) -> ddp_op::Type {
        match self {
            Op::Sum => ddp_op::DDP_OP_SUM,
            Op::Avg => ddp_op::DDP_OP_AVG,
            Op::Min => ddp_op::DDP_OP_MIN,
            Op::Max => ddp_op::DDP_OP_MAX,
            Op::Prod => ddp_op::DDP_OP_PROD,
        }
    }
}

/// Which transport carries the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// `DDP_BACKEND` from the environment, else MPI under an MPI launcher, else `Self_`.
    #[default]
    Auto,
    /// One process, rank 0 of 1.
    Self_,
    /// MPI on host buffers.
    Mpi,
}

/// Settings for [`Comm::init_with`].
///
/// ```
/// let opts = ddp::InitOptions { backend: ddp::Backend::Self_, ..Default::default() };
/// let comm = ddp::Comm::init_with(&opts)?;
/// assert_eq!(comm.backend_name()?, "self");
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InitOptions {
    /// The transport; default [`Backend::Auto`].
    pub backend: Backend,
    /// An MPI communicator to adopt instead of `MPI_COMM_WORLD`, by its
    /// Fortran handle (`MPI_Comm_c2f`; with rsmpi,
    /// `mpi_sys::MPI_Comm_c2f(comm.as_raw())`). libddp duplicates it; the
    /// caller keeps MPI initialized until the `Comm` is dropped. Needs
    /// `Backend::Mpi` or `Auto`.
    pub mpi_comm_fortran: Option<i64>,
    /// Seconds a collective waits for every rank; `None`: `DDP_TIMEOUT_S` or 1800.
    pub timeout_s: Option<f64>,
}

/// Per-call settings of every collective, set with [`Comm::set_collective_options`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CollectiveOptions {
    /// Largest fusion bucket in bytes; `None`: `DDP_FUSION_BYTES` or 1 MiB;
    /// `Some(-1)`: no fusion. Every rank must use the same value.
    pub fusion_bytes: Option<i64>,
    /// Seconds a call may take; `None`: the communicator's timeout.
    pub timeout_s: Option<f64>,
}

impl CollectiveOptions {
    pub(crate) fn raw(&self) -> Result<ddp_collective_options> {
        // SAFETY: zeroed is a valid ddp_collective_options; _init fills it.
        let mut opts: ddp_collective_options = unsafe { std::mem::zeroed() };
        check(unsafe { ddp_sys::ddp_collective_options_init(&mut opts, size_of::<ddp_collective_options>() as u32) })?;
        if let Some(bytes) = self.fusion_bytes {
            opts.fusion_bytes = bytes;
        }
        if let Some(seconds) = self.timeout_s {
            opts.timeout_s = seconds;
        }
        Ok(opts)
    }
}

/// Log levels of [`Comm::log`] (the numbers are Python's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogLevel {
    /// Details.
    Debug,
    /// Progress.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    fn raw(self) -> ddp_log_level::Type {
        match self {
            LogLevel::Debug => ddp_log_level::DDP_LOG_DEBUG,
            LogLevel::Info => ddp_log_level::DDP_LOG_INFO,
            LogLevel::Warn => ddp_log_level::DDP_LOG_WARN,
            LogLevel::Error => ddp_log_level::DDP_LOG_ERROR,
        }
    }
}

/// Whether [`Comm::check_replicas`] found every rank's tensors identical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replicas {
    /// Every tensor holds the same bytes on every rank.
    Identical,
    /// They differ; libddp's message names the first differing tensor and two ranks.
    Differ(String),
}

impl Replicas {
    /// `true` for [`Replicas::Identical`].
    pub fn is_identical(&self) -> bool {
        matches!(self, Replicas::Identical)
    }
}

/// The world communicator: a process group started by [`Comm::init`] and
/// finalized when dropped.
///
/// `Send` but not `Sync`: libddp lets one thread at a time use a
/// communicator, so a `Comm` may move to another thread but not be shared.
///
/// ```
/// let comm = ddp::Comm::init()?;            // self backend outside mpirun
/// assert_eq!((comm.rank()?, comm.size()?), (0, 1));
/// let mut grads = vec![1.0f64, 2.0];
/// comm.allreduce(&mut [&mut grads], ddp::Op::Avg)?;
/// assert_eq!(grads, [1.0, 2.0]);
/// # Ok::<(), ddp::Error>(())
/// ```
///
/// ```compile_fail
/// fn shared<T: Sync>(_: &T) {}
/// shared(&ddp::Comm::init().unwrap());    // Comm is not Sync
/// ```
#[derive(Debug)]
pub struct Comm {
    raw: *mut ddp_comm,
    /// What [`Comm::set_collective_options`] set, filled in once, not per call.
    options: Cell<ddp_collective_options>,
    /// Not Sync (Cell), and the raw pointer is not Send by itself.
    not_sync: PhantomData<Cell<()>>,
}

// SAFETY: libddp allows a communicator to be used from any thread, one at a time;
// moving the Comm moves that right with it. Cell keeps it from being Sync.
unsafe impl Send for Comm {}

impl Comm {
    /// Starts the process group with default settings: MPI under `mpirun`,
    /// else one process. Routes libddp's log lines to the `log` crate when a
    /// logger is installed (see [`crate::logging`]). Collective.
    pub fn init() -> Result<Comm> {
        Self::init_with(&InitOptions::default())
    }

    /// Starts the process group with `options`. Collective.
    pub fn init_with(options: &InitOptions) -> Result<Comm> {
        // SAFETY: zeroed is valid; _init fills the struct as this crate sees it.
        let mut opts: ddp_init_options = unsafe { std::mem::zeroed() };
        check(unsafe { ddp_sys::ddp_init_options_init(&mut opts, size_of::<ddp_init_options>() as u32) })?;
        opts.backend = match options.backend {
            Backend::Auto => ddp_backend::DDP_BACKEND_AUTO,
            Backend::Self_ => ddp_backend::DDP_BACKEND_SELF,
            Backend::Mpi => ddp_backend::DDP_BACKEND_MPI,
        };
        opts.mpi_comm_fortran = options.mpi_comm_fortran.unwrap_or(ddp_sys::DDP_NO_MPI_COMM);
        opts.timeout_s = options.timeout_s.unwrap_or(0.0);
        crate::logging::route_if_logger_installed();
        let mut raw = ptr::null_mut();
        check(unsafe { ddp_sys::ddp_init(&opts, &mut raw) })?;
        let options = match CollectiveOptions::default().raw() {
            Ok(options) => options,
            Err(error) => {
                unsafe { ddp_sys::ddp_finalize(raw) };
                return Err(error);
            }
        };
        Ok(Comm { raw, options: Cell::new(options), not_sync: PhantomData })
    }

    /// The raw handle, for calls through `ddp_sys`. Valid while `self` lives.
    pub fn as_raw(&self) -> *mut ddp_comm {
        self.raw
    }

    /// Sets the options every later collective on this `Comm` uses.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// comm.set_collective_options(ddp::CollectiveOptions { fusion_bytes: Some(-1), ..Default::default() })?;
    /// comm.barrier()?;
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn set_collective_options(&self, options: CollectiveOptions) -> Result<()> {
        self.options.set(options.raw()?);
        Ok(())
    }

    pub(crate) fn raw_options(&self) -> ddp_collective_options {
        self.options.get()
    }

    fn query(&self, f: unsafe extern "C" fn(*const ddp_comm, *mut i32) -> ddp_sys::ddp_status) -> Result<i32> {
        let mut value = 0;
        check(unsafe { f(self.raw, &mut value) })?;
        Ok(value)
    }

    /// This process's rank, 0-based.
    pub fn rank(&self) -> Result<i32> {
        self.query(ddp_sys::ddp_rank)
    }

    /// The number of ranks.
    pub fn size(&self) -> Result<i32> {
        self.query(ddp_sys::ddp_size)
    }

    /// This process's rank among the ranks on its node.
    pub fn local_rank(&self) -> Result<i32> {
        self.query(ddp_sys::ddp_local_rank)
    }

    /// The number of ranks on this node.
    pub fn local_size(&self) -> Result<i32> {
        self.query(ddp_sys::ddp_local_size)
    }

    /// The CUDA device assigned to this rank, `None` when none is.
    pub fn device(&self) -> Result<Option<i32>> {
        let device = self.query(ddp_sys::ddp_device)?;
        Ok((device >= 0).then_some(device))
    }

    /// `"self"` or `"mpi"`.
    pub fn backend_name(&self) -> Result<&'static str> {
        let mut name = ptr::null();
        check(unsafe { ddp_sys::ddp_backend_name(self.raw, &mut name) })?;
        // SAFETY: a static string.
        Ok(unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("?"))
    }

    /// Reduces every tensor in place across all ranks with `op`. Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let mut a = vec![1.0f32, 2.0];
    /// let mut b = vec![3i32];
    /// comm.allreduce(&mut [&mut a], ddp::Op::Sum)?;
    /// // Integers cannot be averaged:
    /// let err = comm.allreduce(&mut [&mut b], ddp::Op::Avg).unwrap_err();
    /// assert_eq!(err.kind(), ddp::ErrorKind::InvalidArgument);
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn allreduce<L: Tensors + ?Sized>(&self, tensors: &mut L, op: Op) -> Result<()> {
        let list = tensors.tensors_mut();
        let opts = self.raw_options();
        check(unsafe {
            ddp_sys::ddp_allreduce_tensor_list(self.raw, list.as_ptr(), list.len() as i64, op.raw(), &opts)
        })
    }

    /// Copies `root`'s tensors into every other rank's. Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let mut params = vec![0.5f64; 8];
    /// comm.broadcast(&mut [&mut params], 0)?;
    /// assert!(comm.broadcast(&mut [&mut params], 1).is_err());   // no rank 1 on one process
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn broadcast<L: Tensors + ?Sized>(&self, tensors: &mut L, root: i32) -> Result<()> {
        let list = tensors.tensors_mut();
        let opts = self.raw_options();
        check(unsafe { ddp_sys::ddp_broadcast_tensor_list(self.raw, list.as_ptr(), list.len() as i64, root, &opts) })
    }

    /// Reduces every rank's tensors into `root`'s with `op`; other ranks'
    /// tensors stay as they were. Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let mut loss = vec![0.25f64];
    /// comm.reduce(&mut [&mut loss], ddp::Op::Sum, 0)?;
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn reduce<L: Tensors + ?Sized>(&self, tensors: &mut L, op: Op, root: i32) -> Result<()> {
        let list = tensors.tensors_mut();
        let opts = self.raw_options();
        check(unsafe {
            ddp_sys::ddp_reduce_tensor_list(self.raw, list.as_ptr(), list.len() as i64, op.raw(), root, &opts)
        })
    }

    /// Makes every rank's optimizer state (leaf tensors and scalars such as
    /// step counts) equal `root`'s, after checking every rank holds the same
    /// structure. Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let (mut m, mut v) = (vec![0.0f32; 4], vec![0.0f32; 4]);
    /// let mut scalars = [10.0, 1e-3];   // step, learning rate
    /// comm.sync_optimizer_state(&mut [&mut m, &mut v], &mut scalars, 0)?;
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn sync_optimizer_state<L: Tensors + ?Sized>(
        &self,
        leaves: &mut L,
        scalars: &mut [f64],
        root: i32,
    ) -> Result<()> {
        let list = leaves.tensors_mut();
        let opts = self.raw_options();
        check(unsafe {
            ddp_sys::ddp_sync_optimizer_state(
                self.raw,
                list.as_ptr(),
                list.len() as i64,
                scalars.as_mut_ptr(),
                scalars.len() as i64,
                root,
                &opts,
            )
        })
    }

    /// Compares every tensor's bytes across ranks. Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let params = vec![1.0f32; 16];
    /// assert!(comm.check_replicas(&[params])?.is_identical());
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn check_replicas<L: Views + ?Sized>(&self, tensors: &L) -> Result<Replicas> {
        let list = tensors.views();
        let opts = self.raw_options();
        let mut identical = 0;
        check(unsafe {
            ddp_sys::ddp_check_replicas(self.raw, list.as_ptr(), list.len() as i64, &opts, &mut identical)
        })?;
        Ok(if identical == 1 { Replicas::Identical } else { Replicas::Differ(last_error_message()) })
    }

    /// Returns when every rank has called it. Collective.
    pub fn barrier(&self) -> Result<()> {
        let opts = self.raw_options();
        check(unsafe { ddp_sys::ddp_barrier(self.raw, &opts) })
    }

    /// Logs `message` as `[ddp RANK/SIZE HH:MM:SS.mmm] message` (to stderr,
    /// or to the `log` crate, see [`crate::logging`]). Local.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// comm.log(ddp::LogLevel::Info, "starting")?;
    /// assert!(comm.log(ddp::LogLevel::Info, "a \0 inside").is_err());
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn log(&self, level: LogLevel, message: &str) -> Result<()> {
        let message = CString::new(message).map_err(|_| Error::invalid_argument("log message contains a NUL byte"))?;
        check(unsafe { ddp_sys::ddp_log(self.raw, level.raw(), message.as_ptr()) })
    }

    /// Finalizes now and reports the status that `Drop` would ignore. Collective.
    pub fn finalize(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        check(unsafe { ddp_sys::ddp_finalize(raw) })
    }
}

impl Drop for Comm {
    /// Finalizes the communicator (waiting for its async requests first).
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the handle came from ddp_init; a failure here has nowhere to go.
            unsafe { ddp_sys::ddp_finalize(self.raw) };
        }
    }
}
