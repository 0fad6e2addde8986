"""Finds and loads libddp.so: DDP_LIBRARY, then the package, then the system."""
import ctypes
import ctypes.util
import os
import subprocess
from pathlib import Path

SONAME = "libddp.so.0"


def candidates():
    """Paths to try, in order, each with where it came from."""
    if os.environ.get("DDP_LIBRARY"):
        yield os.environ["DDP_LIBRARY"], "DDP_LIBRARY"
    packaged = Path(__file__).with_name(SONAME)
    if packaged.exists():
        yield str(packaged), "the ddp package"
    found = ctypes.util.find_library("ddp")
    if found:
        yield found, "the system's library path (ldconfig)"
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "ddp"], check=True,
                                capture_output=True, text=True).stdout.strip()
        yield str(Path(libdir, SONAME)), "pkg-config ddp"
    except (OSError, subprocess.CalledProcessError):
        pass


def load_library():
    """The loaded libddp. RTLD_GLOBAL lets Open MPI's plugins see libmpi's symbols."""
    tried = []
    for path, origin in candidates():
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            tried.append(f"{path} (from {origin}): {error}")
    raise ImportError("libddp.so not found; set DDP_LIBRARY to its path. Tried: "
                      + ("; ".join(tried) or "DDP_LIBRARY unset, none in the package, "
                         "none on the system library path or in pkg-config"))
