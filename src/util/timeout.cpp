#include "util/timeout.hpp"

#include <cmath>
#include <sstream>
#include <string>

#include "util/error.hpp"

namespace ddp {

void check_timeout(double seconds, const char* name, const char* zero_means) {
    if (seconds >= 0 && !std::isinf(seconds)) return;
    std::ostringstream value;
    value << seconds;
    fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + " must be a finite number >= 0 (0: " + zero_means +
                                       "), not " + value.str());
}

}  // namespace ddp
