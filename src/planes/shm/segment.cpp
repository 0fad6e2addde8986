#include "planes/shm/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/descriptor.hpp"
#include "util/error.hpp"

namespace ddp::shm {

namespace {

[[noreturn]] void fail_with_errno(const std::string& what, int error) {
    fail(DDP_ERR_INTERNAL, what + ": " + std::strerror(error));
}

std::byte* map(int fd, size_t bytes, const std::string& name) {
    void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) fail_with_errno("mmap of shared memory " + name, errno);
    return static_cast<std::byte*>(data);
}

}  // namespace

std::unique_ptr<Segment> Segment::create(const std::string& name, size_t bytes) {
    Descriptor fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600));
    if (fd.get() < 0) fail_with_errno("shm_open(" + name + ")", errno);
    // posix_fallocate returns the error instead of setting errno.
    if (int error = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); error != 0) {
        unlink_segment(name);
        fail_with_errno("reserving " + std::to_string(bytes) + " bytes of shared memory " + name, error);
    }
    try {
        return std::unique_ptr<Segment>(new Segment(map(fd.get(), bytes, name), bytes));
    } catch (...) {
        unlink_segment(name);
        throw;
    }
}

std::unique_ptr<Segment> Segment::open(const std::string& name, size_t bytes) {
    Descriptor fd(::shm_open(name.c_str(), O_RDWR, 0600));
    if (fd.get() < 0) fail_with_errno("shm_open(" + name + ")", errno);
    struct stat facts {};
    if (::fstat(fd.get(), &facts) != 0) fail_with_errno("fstat of shared memory " + name, errno);
    if (static_cast<size_t>(facts.st_size) != bytes)
        fail(DDP_ERR_INTERNAL, "shared memory " + name + " has " + std::to_string(facts.st_size) +
                                   " bytes, not the " + std::to_string(bytes) + " expected");
    return std::unique_ptr<Segment>(new Segment(map(fd.get(), bytes, name), bytes));
}

Segment::~Segment() { ::munmap(data_, size_); }

void unlink_segment(const std::string& name) { ::shm_unlink(name.c_str()); }

}  // namespace ddp::shm
