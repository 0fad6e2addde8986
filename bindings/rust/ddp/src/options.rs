//! Per-call options of the collectives, built once and passed with
//! [`crate::Comm::with`], never stored in the communicator.
use std::ffi::c_void;
use std::mem::size_of;
use std::time::Duration;

use ddp_sys::ddp_collective_options;

use crate::error::check;
use crate::Result;

/// The options of one call (or of every call made through one
/// [`crate::Collectives`]): how long it may take, how small tensors are
/// fused, and the CUDA stream that device buffers are ordered on. The
/// defaults are libddp's.
///
/// ```
/// use std::time::Duration;
/// let comm = ddp::Comm::init()?;
/// let quick = ddp::CollectiveOptions::new().timeout(Duration::from_secs(30)).no_fusion();
/// let mut grads = vec![1.0f32; 8];
/// comm.with(quick).allreduce(&mut [&mut grads], ddp::Op::Avg)?;
/// comm.with(quick).barrier()?;
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CollectiveOptions {
    timeout: Option<Duration>,
    fusion_bytes: Option<i64>,
    cuda_stream: Option<*mut c_void>,
}

// SAFETY: the stream pointer is only a handle value that libddp hands to CUDA.
unsafe impl Send for CollectiveOptions {}
unsafe impl Sync for CollectiveOptions {}

impl CollectiveOptions {
    /// libddp's defaults: the communicator's timeout, `DDP_FUSION_BYTES` or
    /// 1 MiB buckets, CUDA's legacy default stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long the call may take before it fails with
    /// [`crate::ErrorKind::Timeout`]. Local: ranks may use different values.
    /// `Duration::ZERO` means the communicator's timeout, as 0 does in C.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The largest fusion bucket in bytes (0: `DDP_FUSION_BYTES` or 1 MiB).
    /// Part of the agreement: every rank must use the same value.
    pub fn fusion_bytes(mut self, bytes: usize) -> Self {
        self.fusion_bytes = Some(i64::try_from(bytes).unwrap_or(i64::MAX));
        self
    }

    /// Reduces every tensor by itself, in place (no fusion). Every rank must
    /// do the same.
    pub fn no_fusion(mut self) -> Self {
        self.fusion_bytes = Some(-1);
        self
    }

    /// Orders calls on device buffers on the `cudaStream_t` `stream` (null:
    /// the legacy default stream). Ignored for host buffers.
    ///
    /// # Safety
    /// `stream` must be null, `cudaStreamPerThread` (2), or a stream of the
    /// communicator's device that outlives every call made with these options.
    pub unsafe fn cuda_stream(mut self, stream: *mut c_void) -> Self {
        self.cuda_stream = Some(stream);
        self
    }

    /// libddp's defaults as the C struct (from `_init`, once per communicator).
    pub(crate) fn raw_defaults() -> Result<ddp_collective_options> {
        // SAFETY: zeroed is a valid ddp_collective_options; _init fills it.
        let mut opts: ddp_collective_options = unsafe { std::mem::zeroed() };
        check(unsafe { ddp_sys::ddp_collective_options_init(&mut opts, size_of::<ddp_collective_options>() as u32) })?;
        Ok(opts)
    }

    /// `defaults` with what was set here.
    pub(crate) fn apply(&self, mut defaults: ddp_collective_options) -> ddp_collective_options {
        if let Some(timeout) = self.timeout {
            defaults.timeout_s = timeout.as_secs_f64();
        }
        if let Some(bytes) = self.fusion_bytes {
            defaults.fusion_bytes = bytes;
        }
        if let Some(stream) = self.cuda_stream {
            defaults.cuda_stream = stream;
        }
        defaults
    }
}
