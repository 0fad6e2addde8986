// The priority list of data planes: each step goes to the first plane that
// says it runs it, and a plane refuses what it lacks with DDP_ERR_UNSUPPORTED
// (the c10d model), so that a new plane (shared memory, say) is added in
// front of the others for the steps it does best.
#include <gtest/gtest.h>

#include <string>

#include "planes/device_plane.hpp"
#include "planes/plane_list.hpp"
#include "util/error.hpp"

namespace ddp {
namespace {

/// A plane that runs only allreduce of f32 from 1 KiB up, and implements
/// nothing else (as a shared-memory plane for large gradients might).
class LargeF32AllreducePlane final : public HostPlane {
public:
    const char* name() const override { return "large-f32"; }
    bool runs(DataOp op, ddp_dtype dtype, ddp_op, int64_t bytes) const override {
        return op == DataOp::allreduce && dtype == DDP_DTYPE_F32 && bytes >= 1024;
    }
    std::unique_ptr<Pending> start_allreduce(void*, int64_t, ddp_dtype, ddp_op) override { return nullptr; }
};

/// A plane that implements nothing at all.
class EmptyPlane final : public HostPlane {
public:
    explicit EmptyPlane(bool claims) : claims_(claims) {}
    const char* name() const override { return "empty"; }
    bool runs(DataOp, ddp_dtype, ddp_op, int64_t) const override { return claims_; }

private:
    bool claims_;
};

/// A device plane that implements nothing either.
class EmptyDevicePlane final : public DevicePlane {
public:
    const char* name() const override { return "empty-device"; }
    bool runs(DataOp op, ddp_dtype dtype, ddp_op) const override {
        return op == DataOp::broadcast || dtype == DDP_DTYPE_I32;
    }
    std::shared_ptr<cuda::Event> watch(void*, Clock::time_point, std::string, WorkEnd) override { return nullptr; }
    void on_failure(std::function<void(ddp_status, const std::string&)>) override {}
    void stop_work() override {}
    std::unique_ptr<DevicePlane> split(int, int, ControlChannel*, Clock::time_point) override { return nullptr; }
    void finalize(bool) override {}
};

std::string unsupported_message(const std::function<void()>& body) {
    try {
        body();
    } catch (const Error& error) {
        EXPECT_EQ(error.status(), DDP_ERR_UNSUPPORTED);
        return error.what();
    }
    ADD_FAILURE() << "no DDP_ERR_UNSUPPORTED";
    return {};
}

TEST(PlaneList, EachStepGoesToTheFirstPlaneThatRunsIt) {
    LargeF32AllreducePlane large;
    EmptyPlane fallback(true);
    const PlaneList planes({&large, &fallback}, nullptr);
    EXPECT_EQ(&planes.host_for(DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_SUM, 4096), &large);
    EXPECT_EQ(&planes.host_for(DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_SUM, 512), &fallback);
    EXPECT_EQ(&planes.host_for(DataOp::allreduce, DDP_DTYPE_F64, DDP_OP_SUM, 4096), &fallback);
    EXPECT_EQ(&planes.host_for(DataOp::broadcast, DDP_DTYPE_F32, DDP_OP_SUM, 4096), &fallback);
}

TEST(PlaneList, NoPlaneThatRunsAStepIsUnsupportedNamingThePlanes) {
    LargeF32AllreducePlane large;
    EmptyPlane none(false);
    const PlaneList planes({&large, &none}, nullptr);
    const std::string message =
        unsupported_message([&] { planes.host_for(DataOp::reduce_scatter, DDP_DTYPE_BF16, DDP_OP_MAX, 64); });
    EXPECT_NE(message.find("reduce_scatter"), std::string::npos) << message;
    EXPECT_NE(message.find("bf16"), std::string::npos) << message;
    EXPECT_NE(message.find("large-f32, empty"), std::string::npos) << message;
}

TEST(PlaneList, WhatAHostPlaneLacksItRefuses) {
    EmptyPlane plane(true);
    float data[4] = {};
    for (const auto& [name, call] : std::initializer_list<std::pair<const char*, std::function<void()>>>{
             {"allreduce", [&] { plane.start_allreduce(data, 4, DDP_DTYPE_F32, DDP_OP_SUM); }},
             {"reduce", [&] { plane.start_reduce(data, 4, DDP_DTYPE_F32, DDP_OP_SUM, 0); }},
             {"broadcast", [&] { plane.start_broadcast(data, 16, 0); }},
             {"allgather", [&] { plane.start_allgather(data, data, 2, DDP_DTYPE_F32); }},
             {"reduce_scatter", [&] { plane.start_reduce_scatter(data, data + 2, 2, DDP_DTYPE_F32, DDP_OP_SUM); }},
         }) {
        const std::string message = unsupported_message(call);
        EXPECT_EQ(message, std::string("the empty plane does not support ") + name);
    }
}

TEST(PlaneList, ADevicePlaneRunsACallOnlyWhenItRunsEveryTensor) {
    EmptyDevicePlane device;
    EmptyPlane host(true);
    const PlaneList planes({&host}, &device);
    float f = 0;
    int32_t i = 0;
    const ddp_tensor f32{&f, 1, DDP_DTYPE_F32, DDP_DEVICE_CUDA, 0};
    const ddp_tensor i32{&i, 1, DDP_DTYPE_I32, DDP_DEVICE_CUDA, 0};
    const ddp_tensor both[] = {i32, f32};
    EXPECT_EQ(planes.device_for(DataOp::allreduce, std::span(&i32, 1), DDP_OP_SUM), &device);
    EXPECT_EQ(planes.device_for(DataOp::allreduce, both, DDP_OP_SUM), nullptr);  // staged
    EXPECT_EQ(planes.device_for(DataOp::broadcast, both, DDP_OP_SUM), &device);
    const std::string message = unsupported_message([&] { device.allgather(both, both, nullptr, Clock::now()); });
    EXPECT_EQ(message, "the empty-device plane does not support allgather");
    EXPECT_EQ(PlaneList({&host}, nullptr).device_for(DataOp::broadcast, both, DDP_OP_SUM), nullptr);
}

}  // namespace
}  // namespace ddp
