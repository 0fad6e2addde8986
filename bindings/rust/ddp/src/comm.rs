//! The communicator: init, queries, finalize on drop. Its collectives are in
//! collectives.rs.
use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr;
use std::time::Duration;

use ddp_sys::{ddp_backend, ddp_collective_options, ddp_comm, ddp_init_options, ddp_log_level, ddp_op};

use crate::error::check;
use crate::{CollectiveOptions, Error, Result};

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
#[non_exhaustive]
pub enum Backend {
    /// `DDP_BACKEND` from the environment, else MPI under an MPI launcher, else `Self_`.
    #[default]
    Auto,
    /// One process, rank 0 of 1.
    Self_,
    /// MPI on host buffers.
    Mpi,
    /// NCCL between the ranks' GPUs for device buffers ([`crate::DeviceSlice`]),
    /// MPI for host buffers and agreement. Where it cannot work (libddp built
    /// without CUDA, no driver, no GPU, no NCCL) [`Comm::init_with`] fails
    /// with [`crate::ErrorKind::Unsupported`] saying which.
    Nccl,
}

/// Settings for [`Comm::init_with`] and [`Comm::init_local_with`].
///
/// ```
/// let opts = ddp::InitOptions { backend: ddp::Backend::Self_, ..Default::default() };
/// let comm = ddp::Comm::init_with(&opts)?;
/// assert_eq!(comm.backend_name(), "self");
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InitOptions {
    /// The transport; default [`Backend::Auto`].
    pub backend: Backend,
    /// An MPI communicator to adopt instead of `MPI_COMM_WORLD`, by its
    /// Fortran handle (`MPI_Comm_c2f`; with rsmpi,
    /// `mpi_sys::MPI_Comm_c2f(comm.as_raw())`). libddp duplicates it; the
    /// caller keeps MPI initialized until the `Comm` is dropped. Needs
    /// `Backend::Mpi` or `Auto`.
    pub mpi_comm_fortran: Option<i64>,
    /// How long a collective waits for every rank; `None` or
    /// `Some(Duration::ZERO)`: `DDP_TIMEOUT_S` or 1800 s, as 0 is in C. Per
    /// call: [`CollectiveOptions::timeout`].
    pub timeout: Option<Duration>,
    /// The last-resort hang watchdog; default [`HangWatchdog::FromEnvironment`].
    pub hang_watchdog: HangWatchdog,
}

impl InitOptions {
    /// These settings as the C struct (`ddp_init_options`).
    fn raw(&self) -> Result<ddp_init_options> {
        // SAFETY: zeroed is valid; _init fills the struct as this crate sees it.
        let mut opts: ddp_init_options = unsafe { std::mem::zeroed() };
        check(unsafe { ddp_sys::ddp_init_options_init(&mut opts, size_of::<ddp_init_options>() as u32) })?;
        opts.backend = match self.backend {
            Backend::Auto => ddp_backend::DDP_BACKEND_AUTO,
            Backend::Self_ => ddp_backend::DDP_BACKEND_SELF,
            Backend::Mpi => ddp_backend::DDP_BACKEND_MPI,
            Backend::Nccl => ddp_backend::DDP_BACKEND_NCCL,
        };
        opts.mpi_comm_fortran = self.mpi_comm_fortran.unwrap_or(ddp_sys::DDP_NO_MPI_COMM);
        opts.timeout_s = self.timeout.map_or(0.0, |timeout| timeout.as_secs_f64());
        // As in C: 0 is the default, < 0 off. A Duration is always finite and
        // >= 0, so libddp's rule for the value (finite) always holds.
        opts.hang_watchdog_s = match self.hang_watchdog {
            HangWatchdog::FromEnvironment => 0.0,
            HangWatchdog::Off => -1.0,
            HangWatchdog::After(grace) => grace.as_secs_f64(),
        };
        Ok(opts)
    }
}

/// The hang watchdog ends the process, with one line naming the call, when a
/// thread stays inside MPI this long past its call's deadline (a thread inside
/// MPI never sees its deadline, e.g. Open MPI's TCP transport after a peer
/// died), so that the launcher ends the job, as PyTorch's NCCL watchdog does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HangWatchdog {
    /// `DDP_HANG_WATCHDOG_S` (`0` or `off` there: no watchdog), else 60 s.
    #[default]
    FromEnvironment,
    /// This grace past the deadline; `After(Duration::ZERO)` is
    /// [`HangWatchdog::FromEnvironment`], as 0 is in C
    /// (`ddp_init_options.hang_watchdog_s`).
    After(Duration),
    /// No watchdog: a thread stuck inside MPI stays stuck.
    Off,
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

/// The world communicator: a process group started by [`Comm::init`] and
/// finalized when dropped. A sub-communicator ([`Comm::split`]) is a
/// [`crate::SubComm`], which dereferences to a `Comm`.
///
/// `Send` but not `Sync`: libddp lets one thread at a time use a
/// communicator, so a `Comm` may move to another thread but not be shared.
///
/// ```
/// let comm = ddp::Comm::init()?;            // self backend outside mpirun
/// assert_eq!((comm.rank(), comm.size()), (0, 1));
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
    /// Fixed for the communicator's life, so asked once at init.
    rank: i32,
    size: i32,
    local_rank: i32,
    local_size: i32,
    device: i32,
    backend_name: &'static str,
    /// libddp's default collective options, filled in once, not per call.
    defaults: ddp_collective_options,
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
        let opts = options.raw()?;
        crate::logging::route_if_logger_installed();
        let mut raw = ptr::null_mut();
        check(unsafe { ddp_sys::ddp_init(&opts, &mut raw) })?;
        // SAFETY: a live communicator from ddp_init; finalized on any error here.
        let comm = unsafe { Self::from_live(raw) };
        if comm.is_err() {
            unsafe { ddp_sys::ddp_finalize(raw) };
        }
        comm
    }

    /// Starts `n` ranks of one group inside this process (experimental; host
    /// memory, or GPUs with [`Comm::init_local_on`]) and returns them, rank i at index i: for a program
    /// that drives several replicas from threads, without a launcher or MPI
    /// (Conflux.jl's way). Move each [`Comm`] to the thread that uses it;
    /// a collective completes once every rank has called it, and what holds
    /// across processes holds between the threads (a thread passing another
    /// list fails every rank with [`crate::ErrorKind::Mismatch`], a thread
    /// that never calls is named in its peers' timeout). Dropping a rank
    /// finalizes it without waiting for its peers; a peer's later call fails
    /// naming it. Local: starts no MPI.
    ///
    /// ```
    /// let comms = ddp::Comm::init_local(2)?;
    /// let sums: Vec<f32> = std::thread::scope(|threads| {
    ///     let ranks: Vec<_> = comms
    ///         .into_iter()
    ///         .map(|comm| {
    ///             threads.spawn(move || {
    ///                 let mut grads = vec![comm.rank() as f32 + 1.0; 4];
    ///                 comm.allreduce(&mut [&mut grads], ddp::Op::Sum).map(|()| grads[0])
    ///             })
    ///         })
    ///         .collect();
    ///     ranks.into_iter().map(|rank| rank.join().unwrap()).collect::<ddp::Result<_>>()
    /// })?;
    /// assert_eq!(sums, [3.0, 3.0]);
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn init_local(n: usize) -> Result<Vec<Comm>> {
        Self::init_local_with(n, &InitOptions::default())
    }

    /// [`Comm::init_local`] with `options`: `timeout` and `hang_watchdog`
    /// apply; a backend other than `Auto` or an MPI communicator is refused
    /// (the group has its own transport).
    pub fn init_local_with(n: usize, options: &InitOptions) -> Result<Vec<Comm>> {
        Self::start_local(n, None, options)
    }

    /// [`Comm::init_local_with`] with a rank per CUDA device: rank i runs
    /// NCCL on GPU `devices[i]` for device tensors, as the nccl backend does
    /// (ranks sharing a GPU need NCCL 2.30 or newer with
    /// `NCCL_MULTI_RANK_GPU_ENABLE=1`); host tensors move as in
    /// [`Comm::init_local`]. Where no GPU, CUDA or NCCL can run it, every
    /// rank fails with [`crate::ErrorKind::Unsupported`] saying why.
    ///
    /// ```
    /// match ddp::Comm::init_local_on(&[0, 1], &ddp::InitOptions::default()) {
    ///     Ok(comms) => assert_eq!(comms[1].device(), Some(1)),
    ///     Err(error) => assert_eq!(error.kind(), ddp::ErrorKind::Unsupported), // no second GPU here
    /// }
    /// ```
    pub fn init_local_on(devices: &[u32], options: &InitOptions) -> Result<Vec<Comm>> {
        let ids = devices
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                i32::try_from(id).map_err(|_| Error::invalid_argument(&format!("devices[{i}] is {id}; too large")))
            })
            .collect::<Result<Vec<i32>>>()?;
        Self::start_local(devices.len(), Some(&ids), options)
    }

    /// `ddp_init_local` of `n` ranks, on `devices` when given (`n` of them).
    fn start_local(n: usize, devices: Option<&[i32]>, options: &InitOptions) -> Result<Vec<Comm>> {
        let opts = options.raw()?;
        crate::logging::route_if_logger_installed();
        let count = i32::try_from(n)
            .map_err(|_| Error::invalid_argument(&format!("n is {n}; a local group has 1 to 4096 ranks")))?;
        // libddp names an n it refuses (0, or over its limit) itself and
        // writes no handle then: room for at least one. An n too large to
        // allocate for is an error, not an abort.
        let mut raw = Vec::new();
        raw.try_reserve_exact(n.max(1))
            .map_err(|_| Error::invalid_argument(&format!("n is {n}; a local group has 1 to 4096 ranks")))?;
        raw.resize(n.max(1), ptr::null_mut());
        let ids = devices.map_or(ptr::null(), <[i32]>::as_ptr);
        check(unsafe { ddp_sys::ddp_init_local(count, ids, &opts, raw.as_mut_ptr()) })?;
        let mut comms = Vec::with_capacity(n);
        for &handle in &raw {
            // SAFETY: live communicators from ddp_init_local; on an error every
            // handle not yet in a Comm is finalized, and the Comms drop theirs.
            match unsafe { Self::from_live(handle) } {
                Ok(comm) => comms.push(comm),
                Err(error) => {
                    for &left in &raw[comms.len()..] {
                        unsafe { ddp_sys::ddp_finalize(left) };
                    }
                    return Err(error);
                }
            }
        }
        Ok(comms)
    }

    /// Asks a live communicator the values a `Comm` keeps.
    ///
    /// # Safety
    /// `raw` is a live communicator from `ddp_init` or `ddp_comm_split`.
    pub(crate) unsafe fn from_live(raw: *mut ddp_comm) -> Result<Comm> {
        let query = |f: unsafe extern "C" fn(*const ddp_comm, *mut i32) -> ddp_sys::ddp_status| {
            let mut value = 0;
            check(f(raw, &mut value)).map(|()| value)
        };
        let mut name = ptr::null();
        check(ddp_sys::ddp_backend_name(raw, &mut name))?;
        Ok(Comm {
            raw,
            rank: query(ddp_sys::ddp_rank)?,
            size: query(ddp_sys::ddp_size)?,
            local_rank: query(ddp_sys::ddp_local_rank)?,
            local_size: query(ddp_sys::ddp_local_size)?,
            device: query(ddp_sys::ddp_device)?,
            // SAFETY: a static string.
            backend_name: CStr::from_ptr(name).to_str().unwrap_or("?"),
            defaults: CollectiveOptions::raw_defaults()?,
            not_sync: PhantomData,
        })
    }

    /// The raw handle, for calls through `ddp_sys`. Valid while `self` lives.
    pub fn as_raw(&self) -> *mut ddp_comm {
        self.raw
    }

    /// libddp's default collective options, with `options` applied.
    pub(crate) fn raw_options(&self, options: &CollectiveOptions) -> ddp_collective_options {
        options.apply(self.defaults)
    }

    /// [`Comm::raw_options`] for `collective` (its name in
    /// `ddp_report_invalid_call`) on a list of `tensors` tensors. Names that
    /// do not fit the list are this rank's invalid argument, found before
    /// libddp reads them: the peers are told, so that their call fails with
    /// a mismatch at once instead of waiting, and the error is returned.
    pub(crate) fn list_options(
        &self,
        options: &CollectiveOptions,
        collective: &str,
        tensors: usize,
    ) -> Result<ddp_collective_options> {
        self.lists_options(options, collective, tensors, tensors)
    }

    /// [`Comm::list_options`] for a call from `inputs` tensors into
    /// `outputs`: the C call takes one count for both lists, so lists of
    /// different lengths are this rank's invalid argument too, reported the same way.
    pub(crate) fn lists_options(
        &self,
        options: &CollectiveOptions,
        collective: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<ddp_collective_options> {
        let opts = self.raw_options(options);
        let invalid = if inputs == outputs {
            options.invalid_names(inputs)
        } else {
            Some(format!("{inputs} inputs for {outputs} outputs; the lists pair up one to one"))
        };
        match invalid {
            Some(reason) => Err(self.refuse(collective, &reason, &opts)),
            None => Ok(opts),
        }
    }

    /// This rank's invalid argument to `collective` (its name in
    /// `ddp_report_invalid_call`), found by this crate before libddp could
    /// see it: the peers are told, so that their call fails with a mismatch
    /// naming this rank at once instead of waiting, and the error to return
    /// is made. `opts` gives the timeout of that step.
    pub(crate) fn refuse(&self, collective: &str, reason: &str, opts: &ddp_collective_options) -> Error {
        let name = CString::new(collective).expect("a collective's name has no NUL byte");
        // The reasons quote a name with its NUL escaped.
        let c_reason = CString::new(reason).unwrap_or_default();
        // SAFETY: live handle and C strings; libddp reads only the timeout of `opts`.
        // A failure (a finalized or broken comm) leaves the argument error to report.
        unsafe { ddp_sys::ddp_report_invalid_call(self.raw, name.as_ptr(), c_reason.as_ptr(), opts) };
        Error::invalid_argument(&format!("rank {}: {reason}", self.rank))
    }

    /// This process's rank, 0-based.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> i32 {
        self.size
    }

    /// This process's rank among the ranks on its node.
    pub fn local_rank(&self) -> i32 {
        self.local_rank
    }

    /// The number of ranks on this node.
    pub fn local_size(&self) -> i32 {
        self.local_size
    }

    /// The CUDA device assigned to this rank (made current by init), `None`
    /// when none is: the `device` of a [`crate::DeviceSlice`].
    pub fn device(&self) -> Option<i32> {
        (self.device >= 0).then_some(self.device)
    }

    /// `"self"`, `"mpi"` or `"nccl"`.
    pub fn backend_name(&self) -> &'static str {
        self.backend_name
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

    /// Breaks the communicator on purpose and tells every peer, for a rank
    /// that hit an error of its own (a NaN loss, out of memory) and is about
    /// to stop: every later call on it fails with [`crate::ErrorKind::Timeout`],
    /// here saying `reason`, on the peers naming this rank, instead of the peers
    /// waiting for this rank until their timeout. Local; never waits for
    /// peers. Experimental in libddp's C API (`ddp_comm_abort`).
    pub fn abort(&self, reason: &str) -> Result<()> {
        let reason = CString::new(reason).map_err(|_| Error::invalid_argument("abort reason contains a NUL byte"))?;
        check(unsafe { ddp_sys::ddp_comm_abort(self.raw, reason.as_ptr()) })
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
