// The priority list of data planes: each step goes to the first plane whose
// capability table covers it, and a plane refuses what it lacks with
// DDP_ERR_UNSUPPORTED (the c10d model), so that a new plane (shared memory,
// say) is added in front of the others for the steps it does best, and a
// data operation added later is passed on by every plane that does not list it.
#include <gtest/gtest.h>

#include <string>

#include "planes/device_plane.hpp"
#include "planes/hierarchical/capabilities.hpp"
#include "planes/mpi/capabilities.hpp"
#include "planes/nccl/capabilities.hpp"
#include "planes/shm/capabilities.hpp"
#include "planes/self/capabilities.hpp"
#include "planes/transport.hpp"
#include "planes/plane_list.hpp"
#include "util/error.hpp"

namespace ddp {
namespace {

/// A plane that runs only allreduce of f32 from 1 KiB up, and implements
/// nothing else (as a shared-memory plane for large gradients might).
class LargeF32AllreducePlane final : public HostPlane {
public:
    const char* name() const override { return "large-f32"; }
    std::span<const Capability> capabilities() const override { return table; }
    static constexpr Capability table[] = {{.ops = {DataOp::allreduce}, .dtypes = {DDP_DTYPE_F32}, .min_bytes = 1024}};
    std::unique_ptr<Pending> start_allreduce(void*, int64_t, ddp_dtype, ddp_op) override { return nullptr; }
};

constexpr Capability every_op[] = {
    {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter}}};

/// A plane that implements nothing at all, whose table claims every
/// operation (a wrong table) or none.
class EmptyPlane final : public HostPlane {
public:
    explicit EmptyPlane(bool claims) : claims_(claims) {}
    const char* name() const override { return "empty"; }
    std::span<const Capability> capabilities() const override {
        return claims_ ? std::span<const Capability>(every_op) : std::span<const Capability>();
    }

private:
    bool claims_;
};

/// A device plane that implements nothing either.
class EmptyDevicePlane final : public DevicePlane {
public:
    const char* name() const override { return "empty-device"; }
    std::span<const Capability> capabilities() const override { return table; }
    static constexpr Capability table[] = {
        {.ops = {DataOp::broadcast}, .memory = Memory::device},
        {.ops = {DataOp::allreduce, DataOp::reduce, DataOp::broadcast, DataOp::allgather, DataOp::reduce_scatter},
         .dtypes = {DDP_DTYPE_I32},
         .memory = Memory::device},
    };
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
             {"exchange", [&] { plane.start_exchange(Exchange{}); }},
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
    const ddp_tensor f32{&f, 1, DDP_DTYPE_F32, DDP_DEVICE_CUDA, 0, 0};
    const ddp_tensor i32{&i, 1, DDP_DTYPE_I32, DDP_DEVICE_CUDA, 0, 0};
    const ddp_tensor both[] = {i32, f32};
    EXPECT_EQ(planes.device_for(DataOp::allreduce, std::span(&i32, 1), DDP_OP_SUM), &device);
    EXPECT_EQ(planes.device_for(DataOp::allreduce, both, DDP_OP_SUM), nullptr);  // staged
    EXPECT_EQ(planes.device_for(DataOp::broadcast, both, DDP_OP_SUM), &device);
    const std::string message = unsupported_message([&] { device.allgather(both, both, nullptr, Clock::now()); });
    EXPECT_EQ(message, "the empty-device plane does not support allgather");
    EXPECT_EQ(PlaneList({&host}, nullptr).device_for(DataOp::broadcast, both, DDP_OP_SUM), nullptr);
}

// A data operation added after every plane's table was written: no real
// plane has heard of it.
constexpr auto an_op_added_later = static_cast<DataOp>(40);

/// A plane that implements only the new operation, as one written for it would.
class NewOpPlane final : public HostPlane {
public:
    const char* name() const override { return "new-op"; }
    std::span<const Capability> capabilities() const override { return table; }
    static constexpr Capability table[] = {{.ops = {an_op_added_later}}};
};

/// A plane with one of the real planes' tables that implements nothing: it
/// stands for that plane in the list, where only its table is asked.
class TableOnlyPlane final : public HostPlane {
public:
    TableOnlyPlane(const char* name, std::span<const Capability> table) : name_(name), table_(table) {}
    const char* name() const override { return name_; }
    std::span<const Capability> capabilities() const override { return table_; }

private:
    const char* name_;
    std::span<const Capability> table_;
};

TEST(PlaneList, ANewOperationIsPassedOnByEveryPlaneThatDoesNotListIt) {
    const std::unique_ptr<Transport> self = make_self_transport();
    TableOnlyPlane shm("shm", shm_capabilities), hierarchical("hierarchical", hierarchical_capabilities),
        mpi("mpi", mpi_capabilities);
    NewOpPlane new_op;
    std::vector<HostPlane*> host = {&shm, &hierarchical, &mpi};
    for (HostPlane* plane : self->host_planes()) host.push_back(plane);
    host.push_back(&new_op);
    const PlaneList planes(host, nullptr);
    for (ddp_dtype dtype : {DDP_DTYPE_U8, DDP_DTYPE_F32, DDP_DTYPE_BF16})
        for (int64_t bytes : {int64_t{8}, int64_t{64} << 20})
            EXPECT_EQ(&planes.host_for(an_op_added_later, dtype, DDP_OP_SUM, bytes), &new_op) << bytes;
    // The same planes still take the operations they list.
    EXPECT_EQ(&planes.host_for(DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_SUM, int64_t{64} << 20), &shm);
    EXPECT_EQ(&planes.host_for(DataOp::allgather, DDP_DTYPE_F32, DDP_OP_SUM, 64), &mpi);
    // Without the new plane, the step is refused naming it and every plane asked.
    host.pop_back();
    const std::string message = unsupported_message(
        [&] { PlaneList(host, nullptr).host_for(an_op_added_later, DDP_DTYPE_F32, DDP_OP_SUM, 64); });
    EXPECT_NE(message.find("an unknown operation"), std::string::npos) << message;
    EXPECT_NE(message.find("shm, hierarchical, mpi, self"), std::string::npos) << message;
    // The device plane's table does not claim it either.
    EXPECT_FALSE(covers(nccl_capabilities, an_op_added_later, DDP_DTYPE_F32, DDP_OP_SUM, Memory::device, 64));
    EXPECT_TRUE(covers(nccl_capabilities, DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_AVG, Memory::device, 64));
}

TEST(PlaneList, ARowCoversOnlyItsOwnDtypesReductionsMemoryAndSizes) {
    // nccl: float MIN and MAX are staged through the host (NaN), integer ones are not.
    EXPECT_FALSE(covers(nccl_capabilities, DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_MAX, Memory::device, 64));
    EXPECT_TRUE(covers(nccl_capabilities, DataOp::allreduce, DDP_DTYPE_I32, DDP_OP_MAX, Memory::device, 64));
    EXPECT_TRUE(covers(nccl_capabilities, DataOp::broadcast, DDP_DTYPE_F32, DDP_OP_MAX, Memory::device, 64));
    EXPECT_FALSE(covers(nccl_capabilities, DataOp::allreduce, DDP_DTYPE_I32, DDP_OP_SUM, Memory::host, 64));
    EXPECT_FALSE(covers(mpi_capabilities, DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_SUM, Memory::device, 64));
    // shm from 4 KiB, hierarchical allreduce only from 1 MiB.
    EXPECT_FALSE(covers(shm_capabilities, DataOp::broadcast, DDP_DTYPE_U8, DDP_OP_SUM, Memory::host, 4095));
    EXPECT_TRUE(covers(shm_capabilities, DataOp::broadcast, DDP_DTYPE_U8, DDP_OP_SUM, Memory::host, 4096));
    EXPECT_FALSE(covers(hierarchical_capabilities, DataOp::reduce, DDP_DTYPE_F32, DDP_OP_SUM, Memory::host,
                        hierarchical_min_bytes));
    EXPECT_TRUE(covers(hierarchical_capabilities, DataOp::allreduce, DDP_DTYPE_F32, DDP_OP_SUM, Memory::host,
                       hierarchical_min_bytes));
    // exchange (point to point, alltoall's steps): on mpi, self, shm and nccl, not on the hierarchical plane.
    for (auto table : {std::span<const Capability>(mpi_capabilities), std::span<const Capability>(self_capabilities)})
        EXPECT_TRUE(covers(table, DataOp::exchange, DDP_DTYPE_BF16, DDP_OP_SUM, Memory::host, 4096));
    // shm's from 1 MiB (below, the mpi plane's sends and receives measured faster).
    EXPECT_FALSE(covers(shm_capabilities, DataOp::exchange, DDP_DTYPE_BF16, DDP_OP_SUM, Memory::host, 1048575));
    EXPECT_TRUE(covers(shm_capabilities, DataOp::exchange, DDP_DTYPE_BF16, DDP_OP_SUM, Memory::host, 1048576));
    EXPECT_TRUE(covers(nccl_capabilities, DataOp::exchange, DDP_DTYPE_BF16, DDP_OP_SUM, Memory::device, 4096));
    EXPECT_FALSE(covers(hierarchical_capabilities, DataOp::exchange, DDP_DTYPE_F32, DDP_OP_SUM, Memory::host,
                        hierarchical_min_bytes));
    // A value outside ddp_dtype's enum is in no set.
    EXPECT_FALSE(covers(self_capabilities, DataOp::allreduce, static_cast<ddp_dtype>(0x777), DDP_OP_SUM,
                        Memory::host, 64));
}

}  // namespace
}  // namespace ddp
