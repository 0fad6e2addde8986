//! What every rank did: a timeline of the collectives ([`Comm::timeline`])
//! and the flight recorder ([`Comm::dump_flight_recorder`]). See
//! `docs/timeline.md` for reading them with `scripts/ddp-trace`.
use std::ffi::CString;
use std::path::Path;
use std::ptr;

use crate::error::check;
use crate::{Comm, Error, Result};

/// A timeline being recorded; it stops (and completes this rank's file)
/// when dropped, or with [`Timeline::stop`] to see the status.
#[derive(Debug)]
#[must_use = "the timeline stops when this guard is dropped"]
pub struct Timeline<'comm> {
    comm: &'comm Comm,
    stopped: bool,
}

impl Timeline<'_> {
    /// Stops recording and completes this rank's file. Local.
    pub fn stop(mut self) -> Result<()> {
        self.stopped = true;
        check(unsafe { ddp_sys::ddp_timeline_stop(self.comm.as_raw()) })
    }
}

impl Drop for Timeline<'_> {
    fn drop(&mut self) {
        if !self.stopped {
            // SAFETY: the Comm outlives its guard; a failure here has nowhere to go.
            unsafe { ddp_sys::ddp_timeline_stop(self.comm.as_raw()) };
        }
    }
}

fn c_path(path: &Path) -> Result<CString> {
    let text = path.to_str().ok_or_else(|| Error::invalid_argument("path is not valid UTF-8"))?;
    CString::new(text).map_err(|_| Error::invalid_argument("path contains a NUL byte"))
}

impl Comm {
    /// Records a Chrome trace-event timeline of every collective into this
    /// rank's file (`path` with `%r` replaced by the rank, else `.rankR`
    /// before a final `.json`) until the returned guard is dropped.
    /// Collective: every rank calls it in the same place among its collectives.
    ///
    /// ```
    /// let comm = ddp::Comm::init()?;
    /// let folder = std::env::temp_dir().join(format!("ddp-doc-timeline-{}", std::process::id()));
    /// std::fs::create_dir_all(&folder).unwrap();
    /// let timeline = comm.timeline(folder.join("trace.json"))?;
    /// comm.allreduce(&mut [&mut vec![1.0f32; 4]], ddp::Op::Sum)?;
    /// timeline.stop()?;
    /// assert!(folder.join("trace.rank0.json").exists());
    /// # Ok::<(), ddp::Error>(())
    /// ```
    pub fn timeline(&self, path: impl AsRef<Path>) -> Result<Timeline<'_>> {
        let path = c_path(path.as_ref())?;
        check(unsafe { ddp_sys::ddp_timeline_start(self.as_raw(), path.as_ptr()) })?;
        Ok(Timeline { comm: self, stopped: false })
    }

    /// Writes this rank's flight recorder (its last collectives: kind,
    /// sequence number, sizes, times, state) to `path` as given, every `%r`
    /// in it replaced by the rank (`"fr.%r.json"`: a file per rank), or with
    /// `None` where automatic dumps go (`DDP_FLIGHT_RECORDER_DIR`, else a
    /// folder per job under the temporary directory; the log names the
    /// file). Local.
    pub fn dump_flight_recorder(&self, path: Option<&Path>) -> Result<()> {
        let path = path.map(c_path).transpose()?;
        let raw = path.as_ref().map_or(ptr::null(), |path| path.as_ptr());
        check(unsafe { ddp_sys::ddp_dump_flight_recorder(self.as_raw(), raw) })
    }
}
