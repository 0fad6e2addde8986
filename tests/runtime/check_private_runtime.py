#!/usr/bin/env python3
"""Passes when nothing libddp throws can reach a C++ runtime or unwinder that
the host process loaded: libddp carries its own (static libstdc++ and
libgcc_eh, src/meson.build) and asks the dynamic linker for none.

Julia links its own libunwind ahead of libgcc_s, and its `_Unwind_*` then took
over the exceptions libddp throws and catches inside itself (abort, SIGSEGV).
The criterion, read from the built library's dynamic section and symbols:
  - no NEEDED C++ runtime or unwinder library;
  - no undefined symbol of the exception machinery (`_Unwind_*`, `__cxa_*`,
    `__gxx_*`, C++ runtime functions `_Z*`), except glibc's own `__cxa_*`
    (atexit, finalize, thread_atexit_impl: versioned GLIBC_*) and the weak
    transactional-memory hooks (`_ITM_*`, `_ZGTt*`) that only libitm defines
    and that no throw reaches;
  - no symbol versioned by libstdc++ or libgcc (GLIBCXX_*, CXXABI_*, GCC_*);
  - none of that machinery exported, where the host could bind to libddp's
    copy instead of its own.

  check_private_runtime.py LIBDDP
"""
import re
import subprocess
import sys

FOREIGN_LIBRARIES = re.compile(r"^lib(stdc\+\+|c\+\+|c\+\+abi|supc\+\+|gcc_s|unwind)[.-]")
MACHINERY = re.compile(r"^(_Unwind_|__cxa_|__gxx_|_Z)")
RUNTIME_VERSIONS = re.compile(r"@+(GLIBCXX|CXXABI|GCC)_")
ALLOWED_WEAK_HOOKS = re.compile(r"^(_ITM_|_ZGTt)")


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def problems(library):
    found = []
    for needed in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", library)):
        if FOREIGN_LIBRARIES.match(needed):
            found.append(f"NEEDED {needed}: a C++ runtime or unwinder from the process's global scope")
    for line in readelf("--dyn-syms", library).splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit():
            continue
        binding, section, name = fields[4], fields[6], fields[7]
        plain = name.split("@")[0]
        if RUNTIME_VERSIONS.search(name):
            found.append(f"{name}: bound to the shared C++ runtime or libgcc_s by its version")
        elif section != "UND" and binding != "LOCAL" and MACHINERY.match(plain):
            found.append(f"{name}: exported, so the host may bind to libddp's copy")
        elif section == "UND" and MACHINERY.match(plain):
            glibc = re.search(r"@+GLIBC_", name) is not None
            hook = binding == "WEAK" and ALLOWED_WEAK_HOOKS.match(plain)
            if not glibc and not hook:
                found.append(f"{name}: undefined, so resolved from the process's global scope")
    return found


def main():
    library = sys.argv[1]
    found = problems(library)
    for problem in found:
        print(problem)
    if found:
        print(f"FAILED: {len(found)} ways an exception thrown in {library} reaches the host's runtime")
        return 1
    print(f"{library}: its C++ runtime and unwinder are its own (none undefined, none NEEDED)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
