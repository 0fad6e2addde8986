#include "planes/plane_list.hpp"

#include <string>

#include "util/dtype.hpp"
#include "util/error.hpp"

namespace ddp {

HostPlane& PlaneList::host_for(DataOp op, ddp_dtype dtype, ddp_op reduction, int64_t bytes) const {
    for (HostPlane* plane : host_)
        if (plane->runs(op, dtype, reduction, bytes)) return *plane;
    std::string asked;
    for (HostPlane* plane : host_) asked += std::string(asked.empty() ? "" : ", ") + plane->name();
    fail(DDP_ERR_UNSUPPORTED, std::string("no data plane of this communicator runs ") + data_op_name(op) + " on " +
                                  dtype_name(dtype) + " host buffers (planes: " + asked + ")");
}

DevicePlane* PlaneList::device_for(DataOp op, std::span<const ddp_tensor> tensors, ddp_op reduction) const {
    if (device_ == nullptr) return nullptr;
    for (const ddp_tensor& tensor : tensors)
        if (!device_->runs(op, dtype_of(tensor), reduction)) return nullptr;
    return device_;
}

}  // namespace ddp
