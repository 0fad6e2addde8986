//! libddp's log lines into the `log` crate.
//!
//! libddp writes its lines (its own warnings, and [`crate::Comm::log`]) to
//! stderr unless a callback takes them. [`crate::Comm::init`] installs this
//! module's callback when the program has set a `log` logger (the `log`
//! crate's max level is not `Off`), so the lines go where the program's other
//! logs go, with target `"ddp"`; otherwise they stay on stderr. Call
//! [`route_to_log`] or [`route_to_stderr`] to choose explicitly.
use std::ffi::{c_void, CStr};

use ddp_sys::ddp_log_level;

/// Sends every libddp log line to the `log` crate (target `"ddp"`). Process-wide.
///
/// ```
/// ddp::logging::route_to_log();
/// ddp::logging::route_to_stderr();
/// ```
pub fn route_to_log() {
    // SAFETY: the callback is a plain function that never unwinds; no user pointer.
    unsafe { ddp_sys::ddp_set_log_callback(Some(forward), std::ptr::null_mut()) };
}

/// Sends libddp's log lines to stderr again (libddp's default). Process-wide.
pub fn route_to_stderr() {
    unsafe { ddp_sys::ddp_set_log_callback(None, std::ptr::null_mut()) };
}

pub(crate) fn route_if_logger_installed() {
    if log::max_level() != log::LevelFilter::Off {
        route_to_log();
    }
}

extern "C" fn forward(level: i32, line: *const std::os::raw::c_char, _user: *mut c_void) {
    let level = match level as ddp_log_level::Type {
        l if l >= ddp_log_level::DDP_LOG_ERROR => log::Level::Error,
        l if l >= ddp_log_level::DDP_LOG_WARN => log::Level::Warn,
        l if l >= ddp_log_level::DDP_LOG_INFO => log::Level::Info,
        _ => log::Level::Debug,
    };
    // SAFETY: libddp passes a NUL-terminated line valid for this call.
    let line = unsafe { CStr::from_ptr(line) }.to_string_lossy();
    // A panicking logger must not unwind into C.
    let _ = std::panic::catch_unwind(|| log::log!(target: "ddp", level, "{line}"));
}
