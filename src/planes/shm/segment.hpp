// One POSIX shared-memory segment mapped into this process. The name exists
// only while the ranks of a communicator open it (see shm_plane.cpp): it is
// unlinked as soon as every rank has it mapped, so nothing is left in
// /dev/shm however the job ends.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace ddp::shm {

class Segment {
public:
    /// Creates `name` (it must not exist) with `bytes` of memory reserved
    /// now, so that a full /dev/shm fails here rather than as SIGBUS later.
    static std::unique_ptr<Segment> create(const std::string& name, size_t bytes);
    /// Maps the segment another rank created; its size must be `bytes`.
    static std::unique_ptr<Segment> open(const std::string& name, size_t bytes);
    ~Segment();
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;

    std::byte* data() const { return data_; }
    size_t size() const { return size_; }

private:
    Segment(std::byte* data, size_t size) : data_(data), size_(size) {}
    std::byte* data_;
    size_t size_;
};

/// Removes the name (the mappings stay); a name already gone is fine.
void unlink_segment(const std::string& name);

}  // namespace ddp::shm
