// A C++ host whose log callback throws, against ddp.h's rule: the exception
// must end in the host's own std::terminate (its handler runs here), never
// unwind into libddp's frames, whose C++ runtime and unwinder are libddp's
// own (that crashed inside libddp, in _Unwind_SetGR).
#include <ddp/ddp.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>

int main() {
    std::set_terminate([] {
        std::puts("the host's terminate handler ran");
        std::fflush(stdout);
        std::_Exit(0);
    });
    ddp_comm* world = nullptr;
    if (ddp_init(nullptr, &world) != DDP_OK) return 1;
    ddp_set_log_callback([](int32_t, const char*, void*) { throw std::runtime_error("from the callback"); }, nullptr);
    ddp_log(world, DDP_LOG_ERROR, "a line the callback throws on");
    std::puts("ddp_log returned: the exception went nowhere");
    return 1;
}
