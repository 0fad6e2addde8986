// What libddp sets in the MPI library itself, where nobody chose.
#pragma once

namespace ddp {

/// Open MPI's default choice of non-blocking allreduce algorithm (libnbc)
/// is 2-3x slower than its blocking one on large buffers; the Rabenseifner
/// algorithm (3) matches or beats it (docs/design.md). The setting is
/// process-wide, so it is made only where nobody chose: the environment
/// does not name it and its value is still 0 ("libnbc decides"). Other MPI
/// libraries have no such variable, and nothing happens. `thread_level`:
/// MPI's. Open MPI's MPI_T_init_thread makes the level it is asked for the
/// process's, so a lower one would leave the next ddp_init in this process
/// without async calls.
void choose_nonblocking_allreduce_algorithm(int thread_level);

}  // namespace ddp
