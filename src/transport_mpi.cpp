// The MPI backend: Open MPI (or any MPI-3 library) on CPU buffers.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <thread>

#include "dtype.hpp"
#include "elementwise.hpp"
#include "error.hpp"
#include "transport.hpp"

namespace ddp {

namespace {

void check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail(DDP_ERR_BACKEND, std::string(call) + " failed: " + std::string(text, length));
}

// MPI has no 16-bit float types: f16 and bf16 travel as MPI_UINT16_T with
// user-defined operations that compute in single precision.
template <ddp_dtype Dtype, ddp_op Op>
void half_reduction(void* in, void* inout, int* length, MPI_Datatype*) {
    reduce_half_into(static_cast<uint16_t*>(inout), static_cast<const uint16_t*>(in), *length,
                     Dtype, Op);
}

class HalfOps {
public:
    HalfOps() {
        create<DDP_DTYPE_F16>(f16_);
        create<DDP_DTYPE_BF16>(bf16_);
    }
    ~HalfOps() {
        for (auto* table : {&f16_, &bf16_})
            for (MPI_Op& op : *table) MPI_Op_free(&op);
    }
    HalfOps(const HalfOps&) = delete;
    HalfOps& operator=(const HalfOps&) = delete;

    MPI_Op get(ddp_dtype dtype, ddp_op op) const {
        return (dtype == DDP_DTYPE_F16 ? f16_ : bf16_)[slot(op)];
    }

private:
    using Table = std::array<MPI_Op, 4>;
    static size_t slot(ddp_op op) {
        switch (op) {
        case DDP_OP_SUM: return 0;
        case DDP_OP_PROD: return 1;
        case DDP_OP_MIN: return 2;
        default: return 3;  // MAX; AVG never reaches a transport
        }
    }
    template <ddp_dtype Dtype>
    static void create(Table& table) {
        check(MPI_Op_create(&half_reduction<Dtype, DDP_OP_SUM>, 1, &table[0]), "MPI_Op_create");
        check(MPI_Op_create(&half_reduction<Dtype, DDP_OP_PROD>, 1, &table[1]), "MPI_Op_create");
        check(MPI_Op_create(&half_reduction<Dtype, DDP_OP_MIN>, 1, &table[2]), "MPI_Op_create");
        check(MPI_Op_create(&half_reduction<Dtype, DDP_OP_MAX>, 1, &table[3]), "MPI_Op_create");
    }
    Table f16_{};
    Table bf16_{};
};

MPI_Datatype mpi_type(ddp_dtype dtype) {
    switch (dtype) {
    case DDP_DTYPE_I8: return MPI_INT8_T;
    case DDP_DTYPE_I32: return MPI_INT32_T;
    case DDP_DTYPE_I64: return MPI_INT64_T;
    case DDP_DTYPE_U8: return MPI_UINT8_T;
    case DDP_DTYPE_F32: return MPI_FLOAT;
    case DDP_DTYPE_F64: return MPI_DOUBLE;
    default: return MPI_UINT16_T;  // f16, bf16
    }
}

MPI_Op mpi_builtin_op(ddp_op op) {
    switch (op) {
    case DDP_OP_SUM: return MPI_SUM;
    case DDP_OP_PROD: return MPI_PROD;
    case DDP_OP_MIN: return MPI_MIN;
    default: return MPI_MAX;
    }
}

// MPI counts are int: longer buffers go in pieces of at most this many elements.
constexpr int64_t max_chunk = INT_MAX / 2;

template <typename Call>
void in_chunks(void* data, int64_t count, size_t element_bytes, Call call) {
    auto* bytes = static_cast<char*>(data);
    for (int64_t done = 0; done < count;) {
        const int64_t piece = std::min(count - done, max_chunk);
        call(bytes + done * static_cast<int64_t>(element_bytes), static_cast<int>(piece));
        done += piece;
    }
}

class MpiTransport final : public Transport {
public:
    explicit MpiTransport(int64_t mpi_comm_fortran) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (finalized)
            fail(DDP_ERR_ALREADY_INITIALIZED,
                 "MPI was already finalized in this process and cannot start again");
        if (mpi_comm_fortran != DDP_NO_MPI_COMM && !initialized)
            fail(DDP_ERR_INVALID_ARGUMENT,
                 "mpi_comm_fortran names a communicator but MPI is not initialized");
        if (initialized) {
            check(MPI_Query_thread(&thread_level_), "MPI_Query_thread");
        } else {
            check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_),
                  "MPI_Init_thread");
            owns_mpi_ = true;
        }
        MPI_Comm base = MPI_COMM_WORLD;
        if (mpi_comm_fortran != DDP_NO_MPI_COMM) {
            base = MPI_Comm_f2c(static_cast<MPI_Fint>(mpi_comm_fortran));
            if (base == MPI_COMM_NULL || base == nullptr)
                fail(DDP_ERR_INVALID_ARGUMENT, "mpi_comm_fortran " + std::to_string(mpi_comm_fortran) +
                                                   " is not a valid MPI communicator handle");
        }
        // A private duplicate keeps libddp's traffic apart from the caller's.
        check(MPI_Comm_dup(base, &comm_), "MPI_Comm_dup");
        check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
        check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
        MPI_Comm node;
        check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
        MPI_Comm_rank(node, &local_rank_);
        MPI_Comm_size(node, &local_size_);
        MPI_Comm_free(&node);
        half_ops_ = std::make_unique<HalfOps>();
    }

    ~MpiTransport() override {
        try {
            finalize();
        } catch (const Error&) {
            // Destructors must not throw; finalize() reports errors when called directly.
        }
    }

    const char* name() const override { return "mpi"; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    int local_rank() const override { return local_rank_; }
    int local_size() const override { return local_size_; }
    bool allows_background_thread() const override {
        return thread_level_ >= MPI_THREAD_SERIALIZED;
    }

    void allreduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op) override {
        MPI_Datatype type = mpi_type(dtype);
        MPI_Op mpi_op = mpi_op_for(dtype, op);
        in_chunks(data, count, element_size(dtype), [&](void* piece, int n) {
            check(MPI_Allreduce(MPI_IN_PLACE, piece, n, type, mpi_op, comm_), "MPI_Allreduce");
        });
    }

    void reduce(void* data, int64_t count, ddp_dtype dtype, ddp_op op, int root) override {
        MPI_Datatype type = mpi_type(dtype);
        MPI_Op mpi_op = mpi_op_for(dtype, op);
        in_chunks(data, count, element_size(dtype), [&](void* piece, int n) {
            if (rank_ == root)
                check(MPI_Reduce(MPI_IN_PLACE, piece, n, type, mpi_op, root, comm_), "MPI_Reduce");
            else
                check(MPI_Reduce(piece, nullptr, n, type, mpi_op, root, comm_), "MPI_Reduce");
        });
    }

    void broadcast(void* data, int64_t bytes, int root) override {
        in_chunks(data, bytes, 1, [&](void* piece, int n) {
            check(MPI_Bcast(piece, n, MPI_BYTE, root, comm_), "MPI_Bcast");
        });
    }

    void max_u64(std::span<uint64_t> values, Clock::time_point deadline) override {
        // MPI works on a member buffer, not on `values`: after a timeout the
        // abandoned reduction may still write into it.
        reduction_buffer_.assign(values.begin(), values.end());
        MPI_Request request;
        check(MPI_Iallreduce(MPI_IN_PLACE, reduction_buffer_.data(), static_cast<int>(values.size()),
                             MPI_UINT64_T, MPI_MAX, comm_, &request),
              "MPI_Iallreduce");
        // Spin briefly (the common case: peers are already there), then poll
        // gently so that a rank waiting for a slow peer leaves the CPU to others.
        const auto spin_until = Clock::now() + std::chrono::microseconds(200);
        for (;;) {
            int done = 0;
            check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
            if (done) {
                std::copy(reduction_buffer_.begin(), reduction_buffer_.end(), values.begin());
                return;
            }
            const auto now = Clock::now();
            if (now > deadline) {
                pending_ = request;
                fail(DDP_ERR_TIMEOUT, "rank " + std::to_string(rank_) +
                                          " waited past the timeout for the other ranks to "
                                          "join the collective; the communicator is now unusable");
            }
            if (now > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    std::vector<std::vector<uint64_t>> allgather_u64(std::span<const uint64_t> words) override {
        int mine = static_cast<int>(words.size());
        std::vector<int> counts(static_cast<size_t>(size_));
        check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "MPI_Allgather");
        std::vector<int> offsets(counts.size());
        int total = 0;
        for (size_t r = 0; r < counts.size(); ++r) {
            offsets[r] = total;
            total += counts[r];
        }
        std::vector<uint64_t> all(static_cast<size_t>(total));
        check(MPI_Allgatherv(words.data(), mine, MPI_UINT64_T, all.data(), counts.data(),
                             offsets.data(), MPI_UINT64_T, comm_),
              "MPI_Allgatherv");
        std::vector<std::vector<uint64_t>> by_rank(counts.size());
        for (size_t r = 0; r < counts.size(); ++r)
            by_rank[r].assign(all.begin() + offsets[r], all.begin() + offsets[r] + counts[r]);
        return by_rank;
    }

    bool broken() const override { return pending_ != MPI_REQUEST_NULL; }

    void finalize() override {
        if (comm_ == MPI_COMM_NULL) return;
        // After a timeout a collective is still pending on comm_. If the late
        // peers arrive within a grace period, MPI can end cleanly; otherwise
        // freeing comm_ or finalizing MPI could wait forever, so both are skipped.
        const auto grace_end = Clock::now() + std::chrono::seconds(5);
        while (pending_ != MPI_REQUEST_NULL && Clock::now() < grace_end) {
            int done = 0;
            MPI_Test(&pending_, &done, MPI_STATUS_IGNORE);
            if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const bool clean = pending_ == MPI_REQUEST_NULL;
        if (clean) half_ops_.reset();
        if (clean) check(MPI_Comm_free(&comm_), "MPI_Comm_free");
        comm_ = MPI_COMM_NULL;
        if (owns_mpi_ && clean) check(MPI_Finalize(), "MPI_Finalize");
    }

private:
    MPI_Op mpi_op_for(ddp_dtype dtype, ddp_op op) const {
        if (dtype == DDP_DTYPE_F16 || dtype == DDP_DTYPE_BF16) return half_ops_->get(dtype, op);
        return mpi_builtin_op(op);
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    std::unique_ptr<HalfOps> half_ops_;
    int thread_level_ = MPI_THREAD_SINGLE;
    bool owns_mpi_ = false;
    MPI_Request pending_ = MPI_REQUEST_NULL;  // the collective a timeout abandoned
    std::vector<uint64_t> reduction_buffer_;
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport(int64_t mpi_comm_fortran) {
    return std::make_unique<MpiTransport>(mpi_comm_fortran);
}

bool mpi_launch_detected() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized || launched_by_mpi_launcher();
}

}  // namespace ddp
