//! The one error type: a libddp status and libddp's message.
use std::ffi::CStr;
use std::fmt;

use ddp_sys::ddp_status;

/// What went wrong, as libddp's `ddp_status` says. A status this crate does
/// not know (from a newer library) is [`ErrorKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument is out of its documented range.
    InvalidArgument,
    /// Ranks passed different lists, ops or roots to the same collective.
    Mismatch,
    /// Valid, but this build or backend cannot do it.
    Unsupported,
    /// The communicator was finalized.
    NotInitialized,
    /// A world communicator is still live (or MPI was finalized).
    AlreadyInitialized,
    /// Peers did not arrive within the timeout; the communicator is broken.
    Timeout,
    /// MPI reported an error.
    Backend,
    /// An allocation failed.
    OutOfMemory,
    /// An output buffer is too small.
    BufferTooSmall,
    /// A bug in libddp.
    Internal,
    /// A status this crate does not know, with its number.
    Other(u32),
}

impl ErrorKind {
    fn from_status(status: ddp_status) -> Self {
        match status {
            ddp_status::DDP_ERR_INVALID_ARGUMENT => Self::InvalidArgument,
            ddp_status::DDP_ERR_MISMATCH => Self::Mismatch,
            ddp_status::DDP_ERR_UNSUPPORTED => Self::Unsupported,
            ddp_status::DDP_ERR_NOT_INITIALIZED => Self::NotInitialized,
            ddp_status::DDP_ERR_ALREADY_INITIALIZED => Self::AlreadyInitialized,
            ddp_status::DDP_ERR_TIMEOUT => Self::Timeout,
            ddp_status::DDP_ERR_BACKEND => Self::Backend,
            ddp_status::DDP_ERR_OUT_OF_MEMORY => Self::OutOfMemory,
            ddp_status::DDP_ERR_BUFFER_TOO_SMALL => Self::BufferTooSmall,
            ddp_status::DDP_ERR_INTERNAL => Self::Internal,
            other => Self::Other(other.0),
        }
    }
}

/// A failed libddp call: its status and the sentence libddp wrote about it
/// (naming the argument, the rank and the tensor index involved).
///
/// ```
/// let err = ddp::shard_indices(-1, 0, 1, &ddp::ShardOptions::default()).unwrap_err();
/// assert_eq!(err.kind(), ddp::ErrorKind::InvalidArgument);
/// assert!(err.message().contains("n_items"));
/// assert_eq!(err.status_name(), "DDP_ERR_INVALID_ARGUMENT");
/// ```
///
/// Its API is this crate's own: no `ddp_sys` type shows through it.
///
/// ```compile_fail,E0599
/// let err = ddp::shard_indices(-1, 0, 1, &ddp::ShardOptions::default()).unwrap_err();
/// let _: ddp_sys::ddp_status = err.status();
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: ddp_status,
    message: String,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_status(self.status)
    }

    /// libddp's message for this failure.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An argument error found on the Rust side, before calling libddp.
    pub(crate) fn invalid_argument(message: &str) -> Self {
        Error { status: ddp_status::DDP_ERR_INVALID_ARGUMENT, message: message.to_owned() }
    }

    /// The status's name, e.g. `"DDP_ERR_MISMATCH"`.
    pub fn status_name(&self) -> &'static str {
        // SAFETY: ddp_status_name returns a static string, never NULL.
        unsafe { CStr::from_ptr(ddp_sys::ddp_status_name(self.status)) }.to_str().unwrap_or("DDP_ERR_?")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message)
    }
}

/// Names the public type and its kind, as `fn main() -> ddp::Result<()>` prints it:
/// `ddp::Error { kind: Mismatch, message: "..." }`, no `ddp_sys` status.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ddp::Error").field("kind", &self.kind()).field("message", &self.message).finish()
    }
}

impl std::error::Error for Error {}

/// Turns a status into a `Result`, reading this thread's last message on failure.
pub(crate) fn check(status: ddp_status) -> Result<()> {
    if status == ddp_status::DDP_OK {
        return Ok(());
    }
    Err(Error { status, message: last_error_message() })
}

/// This thread's last libddp message ("" when none).
pub(crate) fn last_error_message() -> String {
    // SAFETY: never NULL; valid until the next libddp call on this thread,
    // and copied before that.
    unsafe { CStr::from_ptr(ddp_sys::ddp_last_error_message()) }.to_string_lossy().into_owned()
}
