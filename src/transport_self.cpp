// The one-process backend: rank 0 of 1, where every collective's result is
// the input itself.
#include "transport.hpp"

namespace ddp {

namespace {

class SelfTransport final : public Transport {
public:
    const char* name() const override { return "self"; }
    int rank() const override { return 0; }
    int size() const override { return 1; }
    int local_rank() const override { return 0; }
    int local_size() const override { return 1; }
    bool allows_background_thread() const override { return true; }

    void allreduce(void*, int64_t, ddp_dtype, ddp_op) override {}
    void reduce(void*, int64_t, ddp_dtype, ddp_op, int) override {}
    void broadcast(void*, int64_t, int) override {}
    void max_u64(std::span<uint64_t>, Clock::time_point) override {}
    std::vector<std::vector<uint64_t>> allgather_u64(std::span<const uint64_t> words) override {
        return {std::vector<uint64_t>(words.begin(), words.end())};
    }
    bool broken() const override { return false; }
    void finalize() override {}
};

}  // namespace

std::unique_ptr<Transport> make_self_transport() { return std::make_unique<SelfTransport>(); }

}  // namespace ddp
