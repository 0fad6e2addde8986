"""Where libddp's log lines (comm.log's too) go: to stderr, as the C library
and FluxMPI's fluxmpi_println print them, until the program configures
logging (any handler on the "ddp" logger or the root); from then on into
logging.getLogger("ddp"), where its levels and handlers decide."""
import atexit
import logging
import os
import sys

from . import _ffi

LOGGER = logging.getLogger("ddp")
LEVEL_OF_DDP = {_ffi.DDP_LOG_DEBUG: logging.DEBUG, _ffi.DDP_LOG_INFO: logging.INFO,
                _ffi.DDP_LOG_WARN: logging.WARNING, _ffi.DDP_LOG_ERROR: logging.ERROR}
DDP_LEVEL_OF_NAME = {"debug": _ffi.DDP_LOG_DEBUG, "info": _ffi.DDP_LOG_INFO,
                     "warn": _ffi.DDP_LOG_WARN, "warning": _ffi.DDP_LOG_WARN,
                     "error": _ffi.DDP_LOG_ERROR}


def _forward(level, line, user):
    _emit(LEVEL_OF_DDP.get(level, level), line.decode("utf-8", "replace"))


def _emit(level, text):
    if LOGGER.hasHandlers():
        LOGGER.log(level, "%s", text)
    else:
        _write_line(text)


def _write_line(text):
    """Writes text and its newline to stderr in one write, so that the lines
    of ranks sharing a terminal or mpirun's output never interleave (print()
    writes the newline separately)."""
    data = (text + "\n").encode("utf-8", "replace")
    try:
        descriptor = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stderr without a file (an IDE's)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        return
    sys.stderr.flush()  # what Python wrote before goes first
    while data:
        data = data[os.write(descriptor, data):]


def notice(text):
    """A message of the Python package itself, shown as libddp's info lines are."""
    _emit(logging.INFO, text)


# Kept at module level: libddp calls it for the rest of the process's life.
_CALLBACK = _ffi.ddp_log_callback(_forward)


def route_to_logging():
    """From now on every libddp line goes through _emit, until the
    interpreter exits: lines libddp writes after that (from its own
    clean-up) go to stderr instead of into a finalized interpreter."""
    _ffi.ddp_set_log_callback(_CALLBACK, None)
    atexit.unregister(_route_to_stderr)
    atexit.register(_route_to_stderr)


def _route_to_stderr():
    _ffi.ddp_set_log_callback(_ffi.ddp_log_callback(), None)


def ddp_level(level):
    """A ddp_log_level from a name ("info") or a logging level (logging.INFO)."""
    if isinstance(level, str) and level.lower() in DDP_LEVEL_OF_NAME:
        return DDP_LEVEL_OF_NAME[level.lower()]
    for ddp_value, python_value in LEVEL_OF_DDP.items():
        if level == python_value:
            return ddp_value
    raise ValueError(f"log level {level!r}: expected debug, info, warn or error "
                     "(or logging.DEBUG/INFO/WARNING/ERROR)")
