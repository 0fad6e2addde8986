//! Per-call options of the collectives, built once and passed with
//! [`crate::Comm::with`], never stored in the communicator.
use std::ffi::{c_void, CString};
use std::mem::size_of;
use std::os::raw::c_char;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

use ddp_sys::ddp_collective_options;

use crate::error::check;
use crate::Result;

/// The options of one call (or of every call made through one
/// [`crate::Collectives`]): how long it may take, how small tensors are
/// fused, the CUDA stream that device buffers are ordered on, and the
/// tensors' names in a timeline. The defaults are libddp's. Cloning is cheap
/// (the names are shared).
///
/// ```
/// use std::time::Duration;
/// let comm = ddp::Comm::init()?;
/// let quick = ddp::CollectiveOptions::new().timeout(Duration::from_secs(30)).no_fusion();
/// let mut grads = vec![1.0f32; 8];
/// comm.with(quick.clone()).allreduce(&mut [&mut grads], ddp::Op::Avg)?;
/// comm.with(quick).barrier()?;
/// # Ok::<(), ddp::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CollectiveOptions {
    timeout: Option<Duration>,
    fusion_bytes: Option<i64>,
    cuda_stream: Option<*mut c_void>,
    names: Option<Arc<TensorNames>>,
}

/// The names of [`CollectiveOptions::names`] as libddp reads them: owned C
/// strings and an array of pointers to them, or why they cannot be passed.
#[derive(Debug)]
struct TensorNames {
    strings: std::result::Result<Vec<CString>, String>,
    pointers: Vec<*const c_char>,
}

impl PartialEq for TensorNames {
    fn eq(&self, other: &Self) -> bool {
        self.strings == other.strings
    }
}

impl Eq for TensorNames {}

// SAFETY: the pointers point into the C strings beside them, which are never changed.
unsafe impl Send for TensorNames {}
unsafe impl Sync for TensorNames {}

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

    /// The largest fusion bucket in bytes (0: `DDP_FUSION_BYTES` when set, else
    /// chosen by measurement per list; see docs/buckets.md).
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

    /// Names the call's tensors, one per tensor in list order, in the events
    /// of a timeline ([`crate::Comm::timeline`], `DDP_TIMELINE`); read only
    /// while one records. Local: ranks may use different names. A call whose
    /// list has another length, or a name with a NUL byte, fails with
    /// [`crate::ErrorKind::InvalidArgument`] (and its peers with
    /// [`crate::ErrorKind::Mismatch`] naming this rank, at once). A
    /// [`crate::Collectives::barrier`] has no tensors and ignores them.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let (mut w1, mut b1) = (vec![1.0f32; 6], vec![0.0f32; 2]);
    /// let named = ddp::CollectiveOptions::new().names(&["layer1.weight", "layer1.bias"]);
    /// comm.with(named).allreduce(&mut [&mut w1, &mut b1], ddp::Op::Avg)?;
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn names<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        let strings = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                CString::new(name.as_ref())
                    .map_err(|_| format!("names: name {index} ({:?}) contains a NUL byte", name.as_ref()))
            })
            .collect::<std::result::Result<Vec<_>, _>>();
        let pointers = strings.as_ref().map_or(Vec::new(), |strings| strings.iter().map(|s| s.as_ptr()).collect());
        self.names = Some(Arc::new(TensorNames { strings, pointers }));
        self
    }

    /// Why these options cannot go with a call on `tensors` tensors: names
    /// of another count, or a name with a NUL byte.
    pub(crate) fn invalid_names(&self, tensors: usize) -> Option<String> {
        let names = self.names.as_ref()?;
        match &names.strings {
            Err(reason) => Some(reason.clone()),
            Ok(strings) if strings.len() != tensors => {
                Some(format!("names: {} names for a list of {tensors} tensors", strings.len()))
            }
            Ok(_) => None,
        }
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
        // Valid while `self` lives; a call checks the count first (invalid_names).
        defaults.names = match self.names.as_deref() {
            Some(TensorNames { strings: Ok(_), pointers }) => pointers.as_ptr(),
            _ => ptr::null(),
        };
        defaults
    }
}
