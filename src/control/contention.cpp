#include "control/contention.hpp"

namespace ddp {

ContentionWatch::Change ContentionWatch::wait_ended(bool slept) {
    std::lock_guard lock(mutex_);
    if (slept) {
        quiet_in_a_row_ = 0;
        if (contended_) {
            ++slept_while_contended_;
            return Change::none;
        }
        contended_ = true;
        slept_while_contended_ = 1;
        return Change::started;
    }
    if (!contended_ || ++quiet_in_a_row_ < quiet_waits_to_end) return Change::none;
    contended_ = false;
    return Change::ended;
}

int ContentionWatch::slept_while_contended() {
    std::lock_guard lock(mutex_);
    return slept_while_contended_;
}

}  // namespace ddp
