/* Another unwinder, loaded ahead of libddp as Julia loads its libunwind: it
 * defines the _Unwind_* entry points that C++ throws call, so a library
 * whose throws resolve them from the process's global scope lands here. */
#include <stdio.h>
#include <stdlib.h>

static void reached(const char* name) {
    fprintf(stderr, "foreign unwinder reached: %s (libddp's exception left libddp)\n", name);
    abort();
}

void _Unwind_RaiseException(void) { reached("_Unwind_RaiseException"); }
void _Unwind_Resume(void) { reached("_Unwind_Resume"); }
void _Unwind_DeleteException(void) { reached("_Unwind_DeleteException"); }
