//! Sub-communicators: [`Comm::split`] and [`Comm::split_node`] give a
//! [`SubComm`], a [`Comm`] of some of the ranks that frees itself when
//! dropped and cannot outlive the world it came from.
use std::marker::PhantomData;
use std::mem::{size_of, ManuallyDrop};
use std::ops::Deref;
use std::ptr;
use std::time::Duration;

use ddp_sys::{ddp_comm, ddp_split_options};

use crate::error::check;
use crate::{CollectiveOptions, Comm, Result};

/// Settings of a new sub-communicator, for [`Comm::split_with`] and
/// [`Comm::split_node_with`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SplitOptions {
    /// How long the sub-communicator's collectives wait for its ranks;
    /// `None` or `Some(Duration::ZERO)`: its parent's timeout, as 0 is in C.
    /// The split itself is a collective on the parent, held to the parent's
    /// timeout.
    pub timeout: Option<Duration>,
}

/// A sub-communicator: some of the ranks of a world, from [`Comm::split`]
/// or [`Comm::split_node`]. It dereferences to a [`Comm`], so every
/// collective, [`Comm::with`], [`Comm::scope`], [`Comm::reducer`] and query
/// works on it as on the world, over its ranks only; a timeout in it breaks
/// it alone, and its errors name it (`sub-communicator color 1 (comm_split #3
/// of world): ...`).
///
/// Dropping it frees it (`ddp_comm_free`, collective over its ranks, as
/// `MPI_Comm_free`: drop sub-communicators in the same order on every rank);
/// [`SubComm::free`] does the same and reports the status. It borrows its
/// world, so it cannot outlive it (the world's `Drop` would have freed it):
///
/// ```
/// let world = ddp::Comm::init()?;
/// let mut loss = vec![0.5f64];
/// if let Some(sub) = world.split(Some(world.rank() as u32 % 2), 0)? {
///     sub.allreduce(&mut [&mut loss], ddp::Op::Avg)?;
/// }   // freed here
/// # Ok::<(), ddp::Error>(())
/// ```
///
/// ```compile_fail,E0597
/// let sub = {
///     let world = ddp::Comm::init().unwrap();
///     world.split(Some(0), 0).unwrap().unwrap()
/// };  // error[E0597]: `world` does not live long enough
/// ```
///
/// Neither `Send` nor `Sync`, as a `&Comm`: libddp runs different
/// communicators from different threads at once only at
/// `MPI_THREAD_MULTIPLE`, which the types cannot know.
///
/// ```compile_fail,E0277
/// fn sent<T: Send>(_: T) {}
/// let world = ddp::Comm::init().unwrap();
/// sent(world.split_node().unwrap());    // SubComm is not Send
/// ```
#[derive(Debug)]
pub struct SubComm<'w> {
    /// Never dropped as a `Comm` (that would finalize a world): freed by `Drop` here.
    comm: ManuallyDrop<Comm>,
    world: PhantomData<&'w Comm>,
}

impl Comm {
    /// Splits this communicator as `MPI_Comm_split`: the ranks passing the
    /// same `color` form one sub-communicator, ranked by `key` (ties: by
    /// their rank here), returned as `Some`; a rank passing `None` joins none
    /// and gets `None`. A color above `i32::MAX` is this rank's
    /// [`crate::ErrorKind::InvalidArgument`] and every peer's
    /// [`crate::ErrorKind::Mismatch`] naming it. Collective.
    ///
    /// ```
    /// let world = ddp::Comm::init()?;
    /// let row = world.split(Some(world.rank() as u32 / 2), world.rank())?.unwrap();
    /// assert_eq!(row.size(), 1);                       // one process: a row of one
    /// assert!(world.split(None, 0)?.is_none());        // joins none
    /// assert!(world.split(Some(u32::MAX), 0).is_err());
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<SubComm<'_>>> {
        self.split_with(color, key, &SplitOptions::default())
    }

    /// [`Comm::split`] with the sub-communicator's settings. Collective.
    pub fn split_with(&self, color: Option<u32>, key: i32, options: &SplitOptions) -> Result<Option<SubComm<'_>>> {
        Ok(split(self, color, key, options)?.map(sub_comm))
    }

    /// The ranks of this communicator on this rank's node (shared memory),
    /// ranked as here: for hierarchical work (reduce within the node, then
    /// across nodes). Every rank gets one. Collective.
    ///
    /// ```
    /// let world = ddp::Comm::init()?;
    /// let node = world.split_node()?;
    /// assert_eq!((node.rank(), node.size()), (world.local_rank(), world.local_size()));
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn split_node(&self) -> Result<SubComm<'_>> {
        self.split_node_with(&SplitOptions::default())
    }

    /// [`Comm::split_node`] with the sub-communicator's settings. Collective.
    pub fn split_node_with(&self, options: &SplitOptions) -> Result<SubComm<'_>> {
        split_node(self, options).map(sub_comm)
    }
}

impl<'w> SubComm<'w> {
    /// [`Comm::split`] of this sub-communicator: the result may outlive this
    /// one (as libddp allows), not the world.
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<SubComm<'w>>> {
        self.split_with(color, key, &SplitOptions::default())
    }

    /// [`Comm::split_with`] of this sub-communicator, as [`SubComm::split`].
    pub fn split_with(&self, color: Option<u32>, key: i32, options: &SplitOptions) -> Result<Option<SubComm<'w>>> {
        Ok(split(&self.comm, color, key, options)?.map(sub_comm))
    }

    /// [`Comm::split_node`] of this sub-communicator, as [`SubComm::split`].
    pub fn split_node(&self) -> Result<SubComm<'w>> {
        self.split_node_with(&SplitOptions::default())
    }

    /// [`Comm::split_node_with`] of this sub-communicator, as [`SubComm::split`].
    pub fn split_node_with(&self, options: &SplitOptions) -> Result<SubComm<'w>> {
        split_node(&self.comm, options).map(sub_comm)
    }

    /// Frees it now (after its async requests finish) and reports the status
    /// that `Drop` would ignore. Collective over its ranks.
    pub fn free(self) -> Result<()> {
        let this = ManuallyDrop::new(self);
        // SAFETY: a sub-communicator from ddp_comm_split; `Drop` will not free it again.
        check(unsafe { ddp_sys::ddp_comm_free(this.comm.as_raw()) })
    }
}

impl Deref for SubComm<'_> {
    type Target = Comm;

    fn deref(&self) -> &Comm {
        &self.comm
    }
}

impl Drop for SubComm<'_> {
    /// Frees the sub-communicator (waiting for its async requests first).
    fn drop(&mut self) {
        // SAFETY: a sub-communicator from ddp_comm_split; a failure here has nowhere to go.
        unsafe { ddp_sys::ddp_comm_free(self.comm.as_raw()) };
    }
}

/// A `SubComm` of a live handle from `ddp_comm_split`; its queries cannot
/// fail on a live handle, and one that did would leave the handle to the
/// world's finalize.
fn sub_comm<'w>(raw: *mut ddp_comm) -> SubComm<'w> {
    // SAFETY: live, from ddp_comm_split or ddp_comm_split_node.
    let comm = unsafe { Comm::from_live(raw) }.expect("a new sub-communicator answers its queries");
    SubComm { comm: ManuallyDrop::new(comm), world: PhantomData }
}

/// `ddp_comm_split` on `parent`: the new handle, or `None` where this rank
/// joined none. This crate's own checks go through the invalid-call protocol.
fn split(parent: &Comm, color: Option<u32>, key: i32, options: &SplitOptions) -> Result<Option<*mut ddp_comm>> {
    let color = match color.map(i32::try_from) {
        None => Ok(ddp_sys::DDP_COLOR_UNDEFINED),
        Some(Ok(color)) => Ok(color),
        Some(Err(_)) => Err(format!(
            "color {}: more than i32::MAX, the largest libddp takes (None joins no sub-communicator)",
            color.unwrap_or_default()
        )),
    };
    let (color, opts) = match (color, raw_split_options(options)) {
        (Ok(color), Ok(opts)) => (color, opts),
        (Err(reason), _) | (_, Err(reason)) => return Err(refuse(parent, "comm_split", &reason)),
    };
    let mut raw = ptr::null_mut();
    // SAFETY: a live parent (borrowed), options as this crate sees the struct, an out-pointer.
    check(unsafe { ddp_sys::ddp_comm_split(parent.as_raw(), color, key, &opts, &mut raw) })?;
    Ok((!raw.is_null()).then_some(raw))
}

/// `ddp_comm_split_node` on `parent`, as [`split`].
fn split_node(parent: &Comm, options: &SplitOptions) -> Result<*mut ddp_comm> {
    let opts = raw_split_options(options).map_err(|reason| refuse(parent, "comm_split_node", &reason))?;
    let mut raw = ptr::null_mut();
    // SAFETY: as in split.
    check(unsafe { ddp_sys::ddp_comm_split_node(parent.as_raw(), &opts, &mut raw) })?;
    Ok(raw)
}

fn refuse(parent: &Comm, collective: &str, reason: &str) -> crate::Error {
    parent.refuse(collective, reason, &parent.raw_options(&CollectiveOptions::new()))
}

/// libddp's split options with `options` applied, or why they are invalid.
fn raw_split_options(options: &SplitOptions) -> std::result::Result<ddp_split_options, String> {
    // SAFETY: zeroed is valid; _init fills the struct as this crate sees it.
    let mut opts: ddp_split_options = unsafe { std::mem::zeroed() };
    check(unsafe { ddp_sys::ddp_split_options_init(&mut opts, size_of::<ddp_split_options>() as u32) })
        .map_err(|error| error.to_string())?;
    // Any Duration is a timeout libddp takes (finite, >= 0; zero: the parent's):
    // its value is libddp's to check, as for a C caller.
    if let Some(timeout) = options.timeout {
        opts.timeout_s = timeout.as_secs_f64();
    }
    Ok(opts)
}
