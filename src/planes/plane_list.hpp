// A communicator's data planes in priority order, as NCCL's transport table
// and Horovod's op manager pick one: each step goes to the first plane that
// says it runs it. Every rank builds the same list (planes are set up
// collectively) and asks with agreed arguments, so every rank gives a step
// to the same plane.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "planes/device_plane.hpp"
#include "planes/host_plane.hpp"

namespace ddp {

class PlaneList {
public:
    /// `host`: best first (none empty); `device`: nullptr when device
    /// buffers are always staged through the host planes.
    PlaneList(std::vector<HostPlane*> host, DevicePlane* device) : host_(std::move(host)), device_(device) {}

    /// The first host plane that runs the step; DDP_ERR_UNSUPPORTED naming
    /// the step and the planes asked when none does.
    HostPlane& host_for(DataOp op, ddp_dtype dtype, ddp_op reduction, int64_t bytes) const;
    /// The device plane when it runs `op` on every tensor of `tensors`;
    /// nullptr: stage them through the host planes.
    DevicePlane* device_for(DataOp op, std::span<const ddp_tensor> tensors, ddp_op reduction) const;

    std::span<HostPlane* const> host() const { return host_; }
    DevicePlane* device() const { return device_; }

private:
    std::vector<HostPlane*> host_;
    DevicePlane* device_;
};

}  // namespace ddp
