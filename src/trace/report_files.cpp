#include "trace/report_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "util/descriptor.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace ddp::trace {

namespace {

std::string job_name() {
    std::string job;
    for (const char* name : {"SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
        if (auto value = env_string(name)) {
            job = *value;
            break;
        }
    }
    if (job.empty()) job = "pid" + std::to_string(::getpid());
    // A folder name: letters, digits, '.', '-' and '_' kept, the rest '_'.
    for (char& c : job)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
    return job;
}

[[noreturn]] void cannot(const std::string& what, const std::string& path) {
    fail(DDP_ERR_INVALID_ARGUMENT, "cannot " + what + " '" + path + "': " + std::strerror(errno));
}

/// Opens folder `name` inside the folder `parent` refers to (making it,
/// mode 0700, when missing), never through a link. `private_only`: it must
/// also be this user's own and closed to everyone else.
Descriptor open_folder(int parent, const std::string& name, const std::string& path, bool private_only) {
    if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) cannot("create the folder", path);
    Descriptor folder(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (folder.get() < 0) cannot("open the folder", path);
    struct stat about {};
    if (::fstat(folder.get(), &about) != 0) cannot("inspect the folder", path);
    if (private_only && (about.st_uid != ::geteuid() || (about.st_mode & 077) != 0))
        fail(DDP_ERR_INVALID_ARGUMENT, "will not write reports into '" + path +
                                           "': it is not a folder of this user's own with mode 0700 (someone "
                                           "else may have made it); remove it or set DDP_FLIGHT_RECORDER_DIR");
    return folder;
}

void write_at(int folder, const std::string& name, int flags, const std::string& path, const std::string& text) {
    Descriptor file(::openat(folder, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | flags, 0600));
    if (file.get() < 0) cannot("write the flight recorder to", path);
    if (!write_all(file.get(), text + "\n")) cannot("write the flight recorder to", path);
}

}  // namespace

ReportDir::ReportDir(std::string configured) : configured_(std::move(configured)) {
    if (!configured_.empty()) {
        path_ = configured_;
        return;
    }
    temporary_ = env_string("TMPDIR").value_or("/tmp");
    user_ = "ddp-" + std::to_string(::geteuid());
    job_ = job_name();
    path_ = temporary_ + "/" + user_ + "/" + job_;
}

std::string ReportDir::write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    if (!configured_.empty()) {
        if (::mkdir(path_.c_str(), 0700) != 0 && errno != EEXIST) cannot("create the folder", path_);
        Descriptor folder(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (folder.get() < 0) cannot("open the folder", path_);
        write_at(folder.get(), name, O_NOFOLLOW, file, text);
        return file;
    }
    Descriptor temporary(::open(temporary_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (temporary.get() < 0) cannot("open the temporary folder", temporary_);
    const Descriptor mine = open_folder(temporary.get(), user_, temporary_ + "/" + user_, true);
    const Descriptor job = open_folder(mine.get(), job_, path_, true);
    write_at(job.get(), name, O_NOFOLLOW, file, text);
    return file;
}

void write_file(const std::string& path, const std::string& text) { write_at(AT_FDCWD, path, 0, path, text); }

}  // namespace ddp::trace
