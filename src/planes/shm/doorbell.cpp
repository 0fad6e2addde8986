#include "planes/shm/doorbell.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <ctime>

namespace ddp::shm {

namespace {

// Not FUTEX_PRIVATE_FLAG: the word lies in memory other processes map.
long futex(uint32_t* word, int operation, uint32_t value, const timespec* timeout) {
    return ::syscall(SYS_futex, word, operation, value, timeout, nullptr, 0);
}

}  // namespace

Doorbell::Doorbell(std::byte* words)
    : rings_(reinterpret_cast<uint32_t*>(words)), sleepers_(reinterpret_cast<uint32_t*>(words + 4)) {}

bool Doorbell::ring() {
    // Orders the caller's flag store before the look at the sleepers; a
    // sleeper orders its count before its look at the flags (Dekker's
    // pattern), so one of the two sees the other.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers().load(std::memory_order_relaxed) == 0) return false;
    rings().fetch_add(1, std::memory_order_release);
    futex(rings_, FUTEX_WAKE, INT_MAX, nullptr);
    return true;
}

bool Doorbell::sleep_unless(const std::function<bool()>& moved, Clock::time_point until) {
    const uint32_t seen = rings().load(std::memory_order_acquire);
    // Counted in until it returns, thrown out of moved() included.
    struct Counted {
        std::atomic_ref<uint32_t> sleepers;
        explicit Counted(std::atomic_ref<uint32_t> s) : sleepers(s) { sleepers.fetch_add(1, std::memory_order_seq_cst); }
        ~Counted() { sleepers.fetch_sub(1, std::memory_order_relaxed); }
    } const counted(sleepers());
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (moved()) return true;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now()).count();
    if (left <= 0) return true;
    const timespec timeout{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    // Returns at a ring, at once if one came after `seen` (EAGAIN), at a
    // signal (EINTR) or at the timeout (ETIMEDOUT).
    if (futex(rings_, FUTEX_WAIT, seen, &timeout) == 0) return true;
    return errno == EAGAIN || errno == EINTR || errno == ETIMEDOUT;
}

}  // namespace ddp::shm
