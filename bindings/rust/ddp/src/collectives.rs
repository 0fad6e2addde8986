//! The blocking collectives, on a [`Comm`] with libddp's default options or
//! through [`Comm::with`] with options for those calls only.
use crate::error::{check, last_error_message};
use crate::{CollectiveOptions, Comm, Op, Result, Tensors, Views};

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

/// A communicator's collectives with per-call [`CollectiveOptions`], from
/// [`Comm::with`]. Each method is the [`Comm`] method of the same name; the
/// options hold for the calls made through this value and nothing else.
///
/// ```
/// use std::time::Duration;
/// let comm = ddp::Comm::init()?;
/// let mut loss = vec![0.5f64];
/// let patient = comm.with(ddp::CollectiveOptions::new().timeout(Duration::from_secs(3600)));
/// patient.allreduce(&mut [&mut loss], ddp::Op::Avg)?;   // the first step may be slow
/// comm.allreduce(&mut [&mut loss], ddp::Op::Avg)?;      // the communicator's timeout again
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Collectives<'c> {
    pub(crate) comm: &'c Comm,
    pub(crate) options: CollectiveOptions,
}

impl Comm {
    /// This communicator's collectives with `options` for those calls only.
    pub fn with(&self, options: CollectiveOptions) -> Collectives<'_> {
        Collectives { comm: self, options }
    }

    fn defaults(&self) -> Collectives<'_> {
        self.with(CollectiveOptions::new())
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
        self.defaults().allreduce(tensors, op)
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
        self.defaults().broadcast(tensors, root)
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
        self.defaults().reduce(tensors, op, root)
    }

    /// Gathers every rank's `inputs` into every rank's `outputs`, as ZeRO and
    /// FSDP gather parameter shards: `outputs[i]` holds `inputs[i]` of rank 0,
    /// then of rank 1, and so on, so it has `size` times the length and the
    /// same element type. Lists of different lengths, or an output of another
    /// length, are this rank's [`crate::ErrorKind::InvalidArgument`] and its
    /// peers' [`crate::ErrorKind::Mismatch`]. Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let shard = vec![comm.rank() as f32; 2];
    /// let mut full = vec![-1.0f32; 2 * comm.size() as usize];
    /// comm.allgather(&[&shard], &mut [&mut full])?;
    /// assert_eq!(full[..2], [0.0, 0.0]);   // rank 0's shard first
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn allgather<V: Views + ?Sized, L: Tensors + ?Sized>(&self, inputs: &V, outputs: &mut L) -> Result<()> {
        self.defaults().allgather(inputs, outputs)
    }

    /// Reduces every rank's `inputs` with `op` and leaves this rank's shard of
    /// each result in `outputs`, as ZeRO and FSDP reduce gradients: with
    /// `c = inputs[i].len() / size`, `outputs[i]` (`c` elements) gets elements
    /// `rank * c .. (rank + 1) * c` of the reduction. Inputs are only read. An
    /// input length that is not a multiple of the size is
    /// [`crate::ErrorKind::InvalidArgument`] naming the tensor (pad it).
    /// Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let size = comm.size() as usize;
    /// let grads = vec![1.0f32; 4 * size];
    /// let mut shard = vec![0.0f32; 4];
    /// comm.reduce_scatter(&[&grads], &mut [&mut shard], ddp::Op::Sum)?;
    /// assert_eq!(shard, [size as f32; 4]);
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn reduce_scatter<V: Views + ?Sized, L: Tensors + ?Sized>(
        &self,
        inputs: &V,
        outputs: &mut L,
        op: Op,
    ) -> Result<()> {
        self.defaults().reduce_scatter(inputs, outputs, op)
    }

    /// Exchanges blocks between every pair of ranks (the token exchange of
    /// mixture-of-experts layers; MPI's `Alltoall`, torch's
    /// `all_to_all_single`): with `c = inputs[i].len() / size`, block `j` of
    /// `inputs[i]` (elements `j * c .. (j + 1) * c`) goes to rank `j`, and
    /// block `r` of `outputs[i]` receives rank `r`'s block for this rank, in
    /// rank order. `outputs[i]` has the length and element type of
    /// `inputs[i]`; inputs are only read. An input length that is not a
    /// multiple of the size is [`crate::ErrorKind::InvalidArgument`] naming
    /// the tensor; lists and errors otherwise as [`Comm::allgather`].
    /// Collective.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let size = comm.size() as usize;
    /// let tokens: Vec<f32> = (0..2 * size).map(|j| (j / 2) as f32).collect();   // block j for rank j
    /// let mut received = vec![0.0f32; 2 * size];
    /// comm.alltoall(&[&tokens], &mut [&mut received])?;
    /// assert_eq!(received[..2], [comm.rank() as f32; 2]);   // rank 0's block for this rank
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn alltoall<V: Views + ?Sized, L: Tensors + ?Sized>(&self, inputs: &V, outputs: &mut L) -> Result<()> {
        self.defaults().alltoall(inputs, outputs)
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
        self.defaults().sync_optimizer_state(leaves, scalars, root)
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
        self.defaults().check_replicas(tensors)
    }

    /// Returns when every rank has called it. Collective.
    pub fn barrier(&self) -> Result<()> {
        self.defaults().barrier()
    }
}

impl<'c> Collectives<'c> {
    /// The communicator.
    pub fn comm(&self) -> &'c Comm {
        self.comm
    }

    /// [`Comm::allreduce`] with these options.
    pub fn allreduce<L: Tensors + ?Sized>(&self, tensors: &mut L, op: Op) -> Result<()> {
        let list = tensors.tensors_mut();
        let opts = self.comm.list_options(&self.options, "allreduce", list.len())?;
        check(unsafe {
            ddp_sys::ddp_allreduce_tensor_list(self.comm.as_raw(), list.as_ptr(), list.len() as i64, op.raw(), &opts)
        })
    }

    /// [`Comm::broadcast`] with these options.
    pub fn broadcast<L: Tensors + ?Sized>(&self, tensors: &mut L, root: i32) -> Result<()> {
        let list = tensors.tensors_mut();
        let opts = self.comm.list_options(&self.options, "broadcast", list.len())?;
        check(unsafe {
            ddp_sys::ddp_broadcast_tensor_list(self.comm.as_raw(), list.as_ptr(), list.len() as i64, root, &opts)
        })
    }

    /// [`Comm::reduce`] with these options.
    pub fn reduce<L: Tensors + ?Sized>(&self, tensors: &mut L, op: Op, root: i32) -> Result<()> {
        let list = tensors.tensors_mut();
        let opts = self.comm.list_options(&self.options, "reduce", list.len())?;
        check(unsafe {
            ddp_sys::ddp_reduce_tensor_list(self.comm.as_raw(), list.as_ptr(), list.len() as i64, op.raw(), root, &opts)
        })
    }

    /// [`Comm::allgather`] with these options.
    pub fn allgather<V: Views + ?Sized, L: Tensors + ?Sized>(&self, inputs: &V, outputs: &mut L) -> Result<()> {
        let (inputs, outputs) = (inputs.views(), outputs.tensors_mut());
        let opts = self.comm.lists_options(&self.options, "allgather", inputs.len(), outputs.len())?;
        check(unsafe {
            ddp_sys::ddp_allgather_tensor_list(
                self.comm.as_raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
                inputs.len() as i64,
                &opts,
            )
        })
    }

    /// [`Comm::reduce_scatter`] with these options.
    pub fn reduce_scatter<V: Views + ?Sized, L: Tensors + ?Sized>(
        &self,
        inputs: &V,
        outputs: &mut L,
        op: Op,
    ) -> Result<()> {
        let (inputs, outputs) = (inputs.views(), outputs.tensors_mut());
        let opts = self.comm.lists_options(&self.options, "reduce_scatter", inputs.len(), outputs.len())?;
        check(unsafe {
            ddp_sys::ddp_reduce_scatter_tensor_list(
                self.comm.as_raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
                inputs.len() as i64,
                op.raw(),
                &opts,
            )
        })
    }

    /// [`Comm::alltoall`] with these options.
    pub fn alltoall<V: Views + ?Sized, L: Tensors + ?Sized>(&self, inputs: &V, outputs: &mut L) -> Result<()> {
        let (inputs, outputs) = (inputs.views(), outputs.tensors_mut());
        let opts = self.comm.lists_options(&self.options, "alltoall", inputs.len(), outputs.len())?;
        check(unsafe {
            ddp_sys::ddp_alltoall_tensor_list(
                self.comm.as_raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
                inputs.len() as i64,
                &opts,
            )
        })
    }

    /// [`Comm::sync_optimizer_state`] with these options.
    pub fn sync_optimizer_state<L: Tensors + ?Sized>(
        &self,
        leaves: &mut L,
        scalars: &mut [f64],
        root: i32,
    ) -> Result<()> {
        let list = leaves.tensors_mut();
        let opts = self.comm.list_options(&self.options, "sync_optimizer_state", list.len())?;
        check(unsafe {
            ddp_sys::ddp_sync_optimizer_state(
                self.comm.as_raw(),
                list.as_ptr(),
                list.len() as i64,
                scalars.as_mut_ptr(),
                scalars.len() as i64,
                root,
                &opts,
            )
        })
    }

    /// [`Comm::check_replicas`] with these options.
    pub fn check_replicas<L: Views + ?Sized>(&self, tensors: &L) -> Result<Replicas> {
        let list = tensors.views();
        let opts = self.comm.list_options(&self.options, "check_replicas", list.len())?;
        let mut identical = 0;
        check(unsafe {
            ddp_sys::ddp_check_replicas(self.comm.as_raw(), list.as_ptr(), list.len() as i64, &opts, &mut identical)
        })?;
        Ok(if identical == 1 { Replicas::Identical } else { Replicas::Differ(last_error_message()) })
    }

    /// [`Comm::barrier`] with these options.
    pub fn barrier(&self) -> Result<()> {
        let opts = self.comm.raw_options(&self.options);
        check(unsafe { ddp_sys::ddp_barrier(self.comm.as_raw(), &opts) })
    }
}
