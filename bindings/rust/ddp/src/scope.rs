//! Async collectives that are sound: requests live inside [`Comm::scope`], which
//! waits for every one of them before it returns, and each request borrows
//! its buffers for the whole scope.
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr;

use ddp_sys::{ddp_collective_options, ddp_request, ddp_status};

use crate::error::check;
use crate::tensors::{BorrowedTensors, BorrowedViews};
use crate::{CollectiveOptions, Collectives, Comm, Op, Result};

/// The scope of [`Comm::scope`]: starts async collectives whose buffers stay
/// borrowed until the scope ends.
///
/// Soundness: the buffers of a request are borrowed for `'scope`, which
/// outlasts the closure, and the scope waits for (and frees) every request it
/// started before returning, whatever the closure did with the [`Request`]
/// (dropped it, `mem::forget`-ed it, panicked). So no safe code can read,
/// write or free a buffer while libddp's thread writes into it.
#[derive(Debug)]
pub struct Scope<'scope, 'env: 'scope> {
    comm: &'env Comm,
    /// The options of every request started here.
    options: CollectiveOptions,
    /// Every request started here and not yet freed.
    pending: RefCell<Vec<*mut ddp_request>>,
    scope: PhantomData<&'scope mut &'scope ()>,
}

/// A collective in flight, started by [`Scope::allreduce_async`],
/// [`Scope::allgather_async`], [`Scope::reduce_scatter_async`] or
/// [`Scope::alltoall_async`].
#[derive(Debug)]
#[must_use = "a request is waited for at the latest when its scope ends; call wait() to see its result"]
pub struct Request<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    raw: *mut ddp_request,
}

impl Comm {
    /// Runs `f` with a [`Scope`] in which collectives run in the background
    /// (on a thread of the communicator) while the caller computes. Returns
    /// `f`'s value once every request started in the scope has completed; an
    /// `Err` when a request that was not waited for failed.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let mut layer1 = vec![1.0f32; 1000];
    /// let mut layer2 = vec![2.0f32; 10];
    /// comm.scope(|s| -> ddp::Result<()> {
    ///     let first = s.allreduce_async([&mut layer1], ddp::Op::Avg)?;
    ///     // ... compute layer2's gradients meanwhile ...
    ///     let second = s.allreduce_async([&mut layer2], ddp::Op::Avg)?;
    ///     first.wait()?;
    ///     second.wait()
    /// })??;
    /// assert_eq!(layer2[0], 2.0);
    /// # Ok::<(), ddp::Error>(())
    /// ```
    ///
    /// A buffer in flight cannot be touched:
    ///
    /// ```compile_fail
    /// let comm = ddp::Comm::init().unwrap();
    /// let mut grads = vec![1.0f32; 4];
    /// comm.scope(|s| {
    ///     let request = s.allreduce_async([&mut grads], ddp::Op::Sum).unwrap();
    ///     grads[0] = 5.0;   // error: grads is borrowed by the request's scope
    ///     request.wait()
    /// }).unwrap();
    /// ```
    pub fn scope<'env, F, R>(&'env self, f: F) -> Result<R>
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        self.with(CollectiveOptions::new()).scope(f)
    }
}

impl<'env> Collectives<'env> {
    /// [`Comm::scope`], its requests started with these options.
    pub fn scope<F, R>(&self, f: F) -> Result<R>
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let scope = Scope {
            comm: self.comm,
            options: self.options.clone(),
            pending: RefCell::new(Vec::new()),
            scope: PhantomData,
        };
        let result = {
            // Waits on drop, so a panic in `f` also waits before the buffers' borrows end.
            let guard = WaitAll(&scope);
            let result = f(&scope);
            std::mem::forget(guard);
            result
        };
        scope.wait_all().map(|()| result)
    }
}

struct WaitAll<'a, 'scope, 'env>(&'a Scope<'scope, 'env>);

impl Drop for WaitAll<'_, '_, '_> {
    fn drop(&mut self) {
        let _ = self.0.wait_all();
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// The communicator, for blocking calls inside the scope (they wait for
    /// the requests started before them).
    pub fn comm(&self) -> &'env Comm {
        self.comm
    }

    /// Starts an allreduce of `tensors` and returns at once. The list (an
    /// array or `Vec` of `&mut` buffers, or a [`crate::TensorList`]) owns no
    /// buffer; the buffers it borrows stay borrowed until the scope ends. Argument errors are reported here;
    /// errors of the operation itself by [`Request::wait`].
    pub fn allreduce_async<L: BorrowedTensors + 'scope>(
        &'scope self,
        mut tensors: L,
        op: Op,
    ) -> Result<Request<'scope, 'env>> {
        let list = tensors.tensors_mut();
        self.start("allreduce", list.len(), list.len(), |options, raw| unsafe {
            ddp_sys::ddp_allreduce_tensor_list_async(
                self.comm.as_raw(),
                list.as_ptr(),
                list.len() as i64,
                op.raw(),
                options,
                raw,
            )
        })
    }

    /// Starts [`Comm::allgather`] and returns at once; the buffers of both
    /// lists stay borrowed until the scope ends, as in
    /// [`Scope::allreduce_async`].
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let shard = vec![1.0f32; 3];
    /// let mut full = vec![0.0f32; 3 * comm.size() as usize];
    /// comm.scope(|s| s.allgather_async([&shard], [&mut full])?.wait())??;
    /// assert_eq!(full[0], 1.0);
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn allgather_async<V: BorrowedViews + 'scope, L: BorrowedTensors + 'scope>(
        &'scope self,
        inputs: V,
        mut outputs: L,
    ) -> Result<Request<'scope, 'env>> {
        let (inputs, outputs) = (inputs.views(), outputs.tensors_mut());
        self.start("allgather", inputs.len(), outputs.len(), |options, raw| unsafe {
            ddp_sys::ddp_allgather_tensor_list_async(
                self.comm.as_raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
                inputs.len() as i64,
                options,
                raw,
            )
        })
    }

    /// Starts [`Comm::reduce_scatter`] and returns at once, as
    /// [`Scope::allgather_async`].
    pub fn reduce_scatter_async<V: BorrowedViews + 'scope, L: BorrowedTensors + 'scope>(
        &'scope self,
        inputs: V,
        mut outputs: L,
        op: Op,
    ) -> Result<Request<'scope, 'env>> {
        let (inputs, outputs) = (inputs.views(), outputs.tensors_mut());
        self.start("reduce_scatter", inputs.len(), outputs.len(), |options, raw| unsafe {
            ddp_sys::ddp_reduce_scatter_tensor_list_async(
                self.comm.as_raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
                inputs.len() as i64,
                op.raw(),
                options,
                raw,
            )
        })
    }

    /// Starts [`Comm::alltoall`] and returns at once, as
    /// [`Scope::allgather_async`].
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let tokens = vec![1.0f32; 3 * comm.size() as usize];
    /// let mut received = vec![0.0f32; 3 * comm.size() as usize];
    /// comm.scope(|s| s.alltoall_async([&tokens], [&mut received])?.wait())??;
    /// assert_eq!(received[0], 1.0);
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn alltoall_async<V: BorrowedViews + 'scope, L: BorrowedTensors + 'scope>(
        &'scope self,
        inputs: V,
        mut outputs: L,
    ) -> Result<Request<'scope, 'env>> {
        let (inputs, outputs) = (inputs.views(), outputs.tensors_mut());
        self.start("alltoall", inputs.len(), outputs.len(), |options, raw| unsafe {
            ddp_sys::ddp_alltoall_tensor_list_async(
                self.comm.as_raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
                inputs.len() as i64,
                options,
                raw,
            )
        })
    }

    /// Checks the lists' lengths and names, then runs `start` (a
    /// `ddp_*_async` call) with the options and the request's place, and
    /// keeps the request until it is waited for.
    fn start(
        &'scope self,
        collective: &str,
        inputs: usize,
        outputs: usize,
        start: impl FnOnce(&ddp_collective_options, *mut *mut ddp_request) -> ddp_status,
    ) -> Result<Request<'scope, 'env>> {
        let options = self.comm.lists_options(&self.options, collective, inputs, outputs)?;
        let mut raw = ptr::null_mut();
        // libddp copies the descriptor arrays and the names; the buffers are borrowed for 'scope.
        check(start(&options, &mut raw))?;
        self.pending.borrow_mut().push(raw);
        Ok(Request { scope: self, raw })
    }

    /// Frees every request still pending; the first failure is returned.
    fn wait_all(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        let mut first: Result<()> = Ok(());
        for raw in pending {
            let status = check(unsafe { ddp_sys::ddp_request_free(raw) });
            if first.is_ok() {
                first = status;
            }
        }
        first
    }

    /// Takes a request off the pending list.
    fn take(&self, raw: *mut ddp_request) {
        self.pending.borrow_mut().retain(|&pending| pending != raw);
    }
}

impl Request<'_, '_> {
    /// Blocks until the collective completes and returns its result.
    pub fn wait(self) -> Result<()> {
        self.scope.take(self.raw);
        let status = check(unsafe { ddp_sys::ddp_request_wait(self.raw) });
        let freed = check(unsafe { ddp_sys::ddp_request_free(self.raw) });
        status.and(freed)
    }

    /// Makes the `cudaStream_t` `stream` (null: the legacy default stream)
    /// wait for this request without blocking the host, where it runs on the
    /// GPU (device buffers, `nccl` backend): work enqueued on that stream
    /// afterwards starts once the reduction has finished. Any other request
    /// is waited for on the host. Returns the request's status when it is
    /// known by then; [`Request::wait`] still ends it. Experimental in
    /// libddp's C API (`ddp_request_stream_wait`).
    ///
    /// # Safety
    /// `stream` is null, `cudaStreamPerThread` (2) or a live stream of the
    /// communicator's device.
    pub unsafe fn stream_wait(&self, stream: *mut std::ffi::c_void) -> Result<()> {
        check(ddp_sys::ddp_request_stream_wait(self.raw, stream))
    }

    /// Whether the collective has completed; `Err` when it completed with an
    /// error. Never blocks.
    pub fn test(&self) -> Result<bool> {
        let mut done = 0;
        check(unsafe { ddp_sys::ddp_request_test(self.raw, &mut done) })?;
        Ok(done == 1)
    }
}
