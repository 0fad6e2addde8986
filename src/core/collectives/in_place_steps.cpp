#include "core/collectives/in_place_steps.hpp"

#include <cstring>
#include <vector>

#include "device/cpu/elementwise.hpp"
#include "util/dtype.hpp"

namespace ddp {

std::byte* pack_one(const ddp_tensor& tensor, std::byte* bucket) {
    std::memcpy(bucket, tensor.data, byte_size(tensor));
    return bucket + byte_size(tensor);
}

const std::byte* unpack_one(const ddp_tensor& tensor, const std::byte* bucket, double divisor) {
    if (divisor != 1.0)
        divide_copy(tensor.data, bucket, tensor.count, dtype_of(tensor), divisor);
    else
        std::memcpy(tensor.data, bucket, byte_size(tensor));
    return bucket + byte_size(tensor);
}

namespace {

// Whether this rank's members of a fused step already lie back to back in
// memory (views into one flat gradient buffer, as ComponentArrays or a
// destructured model give): then the step runs on them in place, with no
// packing. Only the buffer differs between ranks, never the plane's call, so
// ranks with different memory layouts still issue the same operations.
bool contiguous_members(const FusionPlan& plan, const PlanStep& step, std::span<const ddp_tensor> tensors) {
    const auto members = plan.members_of(step);
    const auto* next = static_cast<const std::byte*>(tensors[static_cast<size_t>(members[0])].data);
    for (int64_t index : members) {
        const ddp_tensor& tensor = tensors[static_cast<size_t>(index)];
        if (byte_size(tensor) == 0) continue;
        if (tensor.data != next) return false;
        next += byte_size(tensor);
    }
    return true;
}

}  // namespace

size_t InPlaceSteps::bucket_bytes(const PlanStep& step) const {
    return static_cast<size_t>(step.elements) * element_size(step.dtype);
}

Place InPlaceSteps::place(const PlanStep& step, const HostPlane& plane) const {
    if (!step.fused || contiguous_members(plan_, step, tensors_)) return Place::caller;
    if (form_.start_pieces && plane.gathers_pieces()) return Place::pieces;
    return Place::bucket;
}

const char* InPlaceSteps::before(Place place) const {
    return place == Place::bucket && form_.pack_before ? "pack" : nullptr;
}

void InPlaceSteps::pack(const PlanStep& step, std::byte* bucket) const {
    for (int64_t index : plan_.members_of(step)) bucket = pack_one(tensors_[static_cast<size_t>(index)], bucket);
}

std::unique_ptr<Pending> InPlaceSteps::start(HostPlane& plane, const PlanStep& step, Place place,
                                             std::byte* bucket) const {
    const auto members = plan_.members_of(step);
    switch (place) {
    case Place::caller:
        return form_.start(plane, tensors_[static_cast<size_t>(members[0])].data, step.elements, step.dtype);
    case Place::pieces: {
        std::vector<Piece> pieces;
        for (int64_t index : members) {
            const ddp_tensor& tensor = tensors_[static_cast<size_t>(index)];
            if (byte_size(tensor) > 0) pieces.push_back({static_cast<std::byte*>(tensor.data), byte_size(tensor)});
        }
        return form_.start_pieces(plane, pieces, step.elements, step.dtype);
    }
    case Place::bucket: return form_.start(plane, bucket, step.elements, step.dtype);
    }
    return nullptr;
}

const char* InPlaceSteps::after(Place place) const {
    if (!form_.unpack_after) return nullptr;
    if (place == Place::bucket) return form_.divisor != 1.0 ? "unpack + divide" : "unpack";
    return form_.divisor != 1.0 ? "divide" : nullptr;
}

void InPlaceSteps::unpack(const PlanStep& step, Place place, const std::byte* bucket) const {
    const auto members = plan_.members_of(step);
    switch (place) {
    case Place::bucket:
        for (int64_t index : members) bucket = unpack_one(tensors_[static_cast<size_t>(index)], bucket, form_.divisor);
        return;
    case Place::pieces:
        for (int64_t index : members) {
            const ddp_tensor& tensor = tensors_[static_cast<size_t>(index)];
            divide_copy(tensor.data, tensor.data, tensor.count, step.dtype, form_.divisor);
        }
        return;
    case Place::caller:
        divide_copy(tensors_[static_cast<size_t>(members[0])].data, tensors_[static_cast<size_t>(members[0])].data,
                    step.elements, step.dtype, form_.divisor);
        return;
    }
}

}  // namespace ddp
