// ddp_init adopting a communicator the program made itself (as mpi4py's
// comm.py2f() hands over): the even and odd ranks each form a group, libddp
// works inside each, and ddp_finalize leaves MPI running for the program.
#include <mpi.h>

#include <gtest/gtest.h>

#include "ddp/ddp.h"

namespace {

int world_rank = 0, world_size = 1;

TEST(Adopt, ASubCommunicatorByItsFortranHandle) {
    MPI_Comm half;
    ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half), MPI_SUCCESS);
    int half_rank = 0, half_size = 0;
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);

    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.mpi_comm_fortran = MPI_Comm_c2f(half);
    ddp_comm* group = nullptr;
    ASSERT_EQ(ddp_init(&opts, &group), DDP_OK) << ddp_last_error_message();
    int32_t rank = -1, size = -1;
    ddp_rank(group, &rank);
    ddp_size(group, &size);
    EXPECT_EQ(rank, half_rank);
    EXPECT_EQ(size, half_size);

    // The sum of world ranks within the group: evens or odds.
    int64_t value = world_rank, expected = 0;
    for (int r = world_rank % 2; r < world_size; r += 2) expected += r;
    ddp_tensor tensor{&value, 1, DDP_DTYPE_I64, DDP_DEVICE_CPU, 0, 0};
    ASSERT_EQ(ddp_allreduce_tensor_list(group, &tensor, 1, DDP_OP_SUM, nullptr), DDP_OK);
    EXPECT_EQ(value, expected);

    ASSERT_EQ(ddp_finalize(group), DDP_OK);
    int finalized = 1;
    MPI_Finalized(&finalized);
    EXPECT_EQ(finalized, 0) << "libddp must not finalize an MPI it did not start";
    // The program's own communicator still works.
    EXPECT_EQ(MPI_Barrier(half), MPI_SUCCESS);
    MPI_Comm_free(&half);
}

TEST(Adopt, AnInvalidHandleIsRejected) {
    ddp_init_options opts;
    ddp_init_options_init(&opts, sizeof opts);
    opts.mpi_comm_fortran = 1 << 30;
    ddp_comm* group = nullptr;
    EXPECT_EQ(ddp_init(&opts, &group), DDP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ddp_last_error_message()).find("not a valid MPI communicator"), std::string::npos)
        << ddp_last_error_message();
}

}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    testing::InitGoogleTest(&argc, argv);
    const int result = RUN_ALL_TESTS();
    MPI_Finalize();
    return result;
}
