"""Finds and loads libddp.so: DDP_LIBRARY when set (and then only it), else
the package's own copy, then the system's."""
import ctypes
import ctypes.util
import os
import subprocess
from pathlib import Path

SONAME = "libddp.so.0"


def candidates():
    """Paths to try when DDP_LIBRARY is not set, in order, each with where it
    came from: the copy inside the package first, so that another libddp on
    the system (an older `meson install`) never stands in for it."""
    packaged = Path(__file__).with_name(SONAME)
    if packaged.exists():
        yield str(packaged), "the ddp package"
    found = ctypes.util.find_library("ddp")
    if found:
        yield found, "the system's library path"
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "ddp"], check=True,
                                capture_output=True, text=True).stdout.strip()
        yield str(Path(libdir, SONAME)), "pkg-config ddp"
    except (OSError, subprocess.CalledProcessError):
        pass


def load_library():
    """The loaded libddp. RTLD_GLOBAL lets Open MPI's plugins see libmpi's symbols.
    A DDP_LIBRARY that cannot be loaded is an error: falling back to another
    libddp would run a library the user did not ask for."""
    chosen = os.environ.get("DDP_LIBRARY")
    if chosen:
        try:
            return ctypes.CDLL(chosen, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise ImportError(f"DDP_LIBRARY={chosen} cannot be loaded ({error}); set it to "
                              "the path of a libddp.so.0, or unset it to use the package's "
                              "own libddp") from None
    tried = []
    for path, origin in candidates():
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            tried.append(f"{path} (from {origin}): {error}")
    raise ImportError("libddp.so not found; set DDP_LIBRARY to its path. Tried: "
                      + ("; ".join(tried) or "none in the package, none on the system "
                         "library path or in pkg-config"))
