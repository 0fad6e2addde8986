//! Persistent gradient buckets (libddp's `ddp_reducer_*`, PyTorch DDP's
//! reducer): gradients computed straight into views of the buckets, each
//! bucket reduced in the background as soon as its gradients are marked
//! ready, one wait per step.
//!
//! Soundness: while a bucket is reduced, libddp's thread writes it, so no
//! Rust reference to it may live. A [`Step`] borrows its [`Reducer`]
//! mutably and hands out each gradient's view once per step;
//! [`Step::mark_ready`] takes the view by value, so a gradient cannot be
//! touched after it is marked; [`Step::wait`] (or dropping the step) ends
//! the step only after every bucket has finished, and only then can the
//! reduced gradients be read through the reducer.
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr;

use ddp_sys::{ddp_reducer, ddp_tensor};

use crate::error::check;
use crate::{CollectiveOptions, Collectives, Comm, Element, Error, ErrorKind, Op, Result, Views};

/// A registered list of gradients, reduced with one op every step. Made
/// by [`Comm::reducer`]; lives no longer than its communicator.
///
/// ```
/// let comm = ddp::Comm::init()?;
/// let (weights, bias) = (vec![0.5f32; 6], vec![0.0f32; 2]);
/// let mut reducer = comm.reducer(&[&weights, &bias], ddp::Op::Avg)?;
/// for _ in 0..3 {
///     let step = reducer.step();
///     let mut grads = step.gradients::<f32>()?;
///     // The backward pass: the last layer's gradient first.
///     while let Some(mut grad) = grads.pop() {
///         grad.fill(1.0);                 // computed in place, in its bucket
///         step.mark_ready(grad)?;         // its bucket may start now
///     }
///     step.wait()?;                       // every bucket reduced
/// }
/// assert_eq!(reducer.gradient::<f32>(0)?, [1.0; 6]);
/// # Ok::<(), ddp::Error>(())
/// ```
///
/// A view cannot outlive its step, nor be used once marked ready:
///
/// ```compile_fail,E0505
/// let comm = ddp::Comm::init().unwrap();
/// let mut reducer = comm.reducer(&[vec![0.0f32; 4]], ddp::Op::Sum).unwrap();
/// let step = reducer.step();
/// let mut grad = step.gradient::<f32>(0).unwrap();
/// step.wait().unwrap();   // error: `step` is borrowed by `grad`
/// grad[0] = 1.0;
/// ```
///
/// ```compile_fail,E0382
/// let comm = ddp::Comm::init().unwrap();
/// let mut reducer = comm.reducer(&[vec![0.0f32; 4]], ddp::Op::Sum).unwrap();
/// let step = reducer.step();
/// let mut grad = step.gradient::<f32>(0).unwrap();
/// step.mark_ready(grad).unwrap();
/// grad[0] = 1.0;          // error: `grad` was moved into mark_ready
/// ```
///
/// ```compile_fail,E0597
/// let mut reducer = {
///     let comm = ddp::Comm::init().unwrap();
///     comm.reducer(&[vec![0.0f32; 4]], ddp::Op::Sum).unwrap()
/// };                      // error: `comm` dropped while the reducer borrows it
/// ```
#[derive(Debug)]
pub struct Reducer<'c> {
    raw: *mut ddp_reducer,
    len: usize,
    /// A step failed with reductions that may still write the buckets (a
    /// timeout or backend error): no view is handed out any more.
    broken: bool,
    comm: PhantomData<&'c Comm>,
}

/// One step of a [`Reducer`]: views of the gradients, marking them ready,
/// the wait. Dropping a step that was not waited for waits (as libddp's
/// `ddp_reducer_free` does), ignoring the result, so that peers are not
/// left waiting and no bucket is in flight once the step is gone.
#[derive(Debug)]
#[must_use = "a step ends with wait(), which says whether the reduction succeeded"]
pub struct Step<'r, 'c> {
    reducer: &'r mut Reducer<'c>,
    /// Which gradients' views were handed out this step (each once).
    taken: RefCell<Vec<bool>>,
    waited: bool,
}

/// Gradient `index`'s storage in its bucket, for one step: a `&mut [T]`
/// (through `Deref`) to compute the gradient in, then given to
/// [`Step::mark_ready`].
#[derive(Debug)]
pub struct Gradient<'s, T> {
    reducer: *mut ddp_reducer,
    index: usize,
    data: &'s mut [T],
}

impl Comm {
    /// Registers gradients shaped like `like` (their element types and
    /// lengths, e.g. the parameters) to be reduced with `op` every step. The
    /// buckets are planned, agreed on with every rank and allocated once.
    /// Collective: a rank registering a different list makes every rank fail
    /// with [`crate::ErrorKind::Mismatch`].
    pub fn reducer<L: Views + ?Sized>(&self, like: &L, op: Op) -> Result<Reducer<'_>> {
        self.with(CollectiveOptions::new()).reducer(like, op)
    }
}

impl<'c> Collectives<'c> {
    /// [`Comm::reducer`]; the options' fusion size sizes its buckets (every
    /// rank must use the same) and their timeout holds for every step.
    pub fn reducer<L: Views + ?Sized>(&self, like: &L, op: Op) -> Result<Reducer<'c>> {
        let list = like.views();
        let opts = self.comm.list_options(&self.options, "reducer_create", list.len())?;
        let mut raw = ptr::null_mut();
        check(unsafe {
            ddp_sys::ddp_reducer_create(self.comm.as_raw(), list.as_ptr(), list.len() as i64, op.raw(), &opts, &mut raw)
        })?;
        Ok(Reducer { raw, len: list.len(), broken: false, comm: PhantomData })
    }
}

impl<'c> Reducer<'c> {
    /// The number of gradients.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no gradient.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts a step.
    pub fn step(&mut self) -> Step<'_, 'c> {
        let taken = RefCell::new(vec![false; self.len]);
        Step { reducer: self, taken, waited: false }
    }

    /// Gradient `index` as the last step left it (reduced, when that step
    /// succeeded). `Err` for an index out of range or another element type.
    pub fn gradient<T: Element>(&self, index: usize) -> Result<&[T]> {
        let (data, len) = self.storage::<T>(index)?;
        // SAFETY: no step is in progress (a Step borrows self mutably), so
        // nothing writes the bucket while this shared borrow lives.
        Ok(unsafe { slice_from_raw(data, len) })
    }

    /// Gradient `index`'s place in its bucket, checked against `T`.
    fn storage<T: Element>(&self, index: usize) -> Result<(*mut T, usize)> {
        if self.broken {
            return Err(Error::invalid_argument(
                "a step of this reducer failed with reductions in flight; its buckets are no longer readable",
            ));
        }
        // SAFETY: zeroed is a valid ddp_tensor; libddp fills it.
        let mut tensor: ddp_tensor = unsafe { std::mem::zeroed() };
        check(unsafe { ddp_sys::ddp_reducer_gradient(self.raw, index as i64, &mut tensor) })?;
        if tensor.dtype != T::DTYPE as i32 {
            return Err(Error::invalid_argument(&format!(
                "gradient {index} is registered as dtype {:#06x}, not {} (dtype {:#06x})",
                tensor.dtype,
                std::any::type_name::<T>(),
                T::DTYPE
            )));
        }
        Ok((tensor.data as *mut T, tensor.count as usize))
    }
}

/// A slice of `len` elements at `data` (which may be null when `len` is 0).
unsafe fn slice_from_raw<'a, T>(data: *mut T, len: usize) -> &'a mut [T] {
    if len == 0 {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(data, len)
    }
}

impl Drop for Reducer<'_> {
    /// Frees the buckets (no step is in progress: a step waits when dropped).
    fn drop(&mut self) {
        unsafe { ddp_sys::ddp_reducer_free(self.raw) };
    }
}

impl<'r, 'c> Step<'r, 'c> {
    /// Gradient `index`'s view for this step, handed out once per step.
    /// `Err` (local) for an index out of range, a view already taken, or
    /// another element type; the step still ends with [`Step::wait`] on
    /// every rank, which then reports the gradients this rank did not mark.
    pub fn gradient<T: Element>(&self, index: usize) -> Result<Gradient<'_, T>> {
        let (data, len) = self.reducer.storage::<T>(index)?;
        let mut taken = self.taken.borrow_mut();
        if std::mem::replace(&mut taken[index], true) {
            return Err(Error::invalid_argument(&format!("gradient {index}'s view was already taken this step")));
        }
        // SAFETY: each index's view is handed out once per step, and the
        // bucket is not reduced before this view is given back to
        // mark_ready or the step ends, which both end this borrow.
        let data = unsafe { slice_from_raw(data, len) };
        Ok(Gradient { reducer: self.reducer.raw, index, data })
    }

    /// Every gradient's view, in registration order; all must be of type `T`.
    pub fn gradients<T: Element>(&self) -> Result<Vec<Gradient<'_, T>>> {
        (0..self.reducer.len).map(|index| self.gradient(index)).collect()
    }

    /// Marks `gradient` computed: once every gradient of its bucket is
    /// marked (and every earlier bucket has started) that bucket's reduction
    /// starts while the caller goes on. Local.
    pub fn mark_ready<T>(&self, gradient: Gradient<'_, T>) -> Result<()> {
        if gradient.reducer != self.reducer.raw {
            return Err(Error::invalid_argument(&format!("gradient {} belongs to another reducer", gradient.index)));
        }
        check(unsafe { ddp_sys::ddp_reducer_mark_ready(self.reducer.raw, gradient.index as i64) })
    }

    /// Ends the step: starts any bucket not yet started, waits for every
    /// bucket, and checks that every rank marked the same gradients
    /// ([`crate::ErrorKind::Mismatch`] naming the rank and gradient
    /// otherwise, on every rank). Collective.
    pub fn wait(mut self) -> Result<()> {
        self.waited = true;
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        let result = check(unsafe { ddp_sys::ddp_reducer_wait(self.reducer.raw) });
        if let Err(error) = &result {
            self.reducer.broken |= matches!(error.kind(), ErrorKind::Timeout | ErrorKind::Backend);
        }
        result
    }
}

impl Drop for Step<'_, '_> {
    fn drop(&mut self) {
        if !self.waited {
            let _ = self.finish();
        }
    }
}

impl<T> Gradient<'_, T> {
    /// Its index in the registered list.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Copies `source` into the gradient: `Err` when the lengths differ
    /// (where `copy_from_slice` would panic).
    pub fn copy_from(&mut self, source: &[T]) -> Result<()>
    where
        T: Copy,
    {
        if source.len() != self.data.len() {
            return Err(Error::invalid_argument(&format!(
                "gradient {} has {} elements; the slice copied into it has {}",
                self.index,
                self.data.len(),
                source.len()
            )));
        }
        self.data.copy_from_slice(source);
        Ok(())
    }
}

impl<T> Deref for Gradient<'_, T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T> DerefMut for Gradient<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}
