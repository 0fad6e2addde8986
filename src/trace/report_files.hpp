// Where a rank's automatic reports (flight recorder dumps) go, and writing
// them there safely, so that a failure puts one line in the log instead of
// kilobytes of JSON: DDP_FLIGHT_RECORDER_DIR when set, else a folder of the
// user's own under the system's temporary directory, one per job.
#pragma once

#include <string>

namespace ddp::trace {

class ReportDir {
public:
    /// `configured`: DDP_FLIGHT_RECORDER_DIR; "" for the default,
    /// $TMPDIR (or /tmp) + "/ddp-UID/JOB", JOB being the launcher's job id
    /// (SLURM_JOB_ID, PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid) or "pidPID"
    /// without one.
    explicit ReportDir(std::string configured);

    const std::string& path() const { return path_; }

    /// Writes `text` to path()/`name` (mode 0600, never through a link) and
    /// returns the file's path. Missing folders are made (mode 0700); in the
    /// default place, which other users share, each must be a real folder of
    /// this user's own that no one else may enter. Throws
    /// DDP_ERR_INVALID_ARGUMENT saying why when it cannot.
    std::string write(const std::string& name, const std::string& text) const;

private:
    std::string configured_;
    std::string temporary_, user_, job_;  ///< the default: temporary_/user_/job_
    std::string path_;
};

/// Writes `text` to exactly `path` (mode 0600 when created). Throws
/// DDP_ERR_INVALID_ARGUMENT saying why when it cannot.
void write_file(const std::string& path, const std::string& text);

}  // namespace ddp::trace
