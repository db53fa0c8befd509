"""Freed large buffers go back to the system at once (glibc's malloc, Linux).

glibc serves allocations of 128 KiB and more with their own mappings, returned to the
system when freed, but it raises that threshold to the size of any such block freed
(up to 32 MiB). After one large read, the chunks every connection's transport reads
(up to 256 KiB each) come from the heap instead, and a thousand connections' worth of
them, freed between longer-lived objects, stays resident (tens of MB of a name server's
RSS in a partial-frame flood: tests/namesrv/test_limits_rss.py). Fixing the threshold at
its default
stops that adjustment; it costs a mapping per large buffer, small beside the copying
of its bytes. ``MALLOC_MMAP_THRESHOLD_`` in the environment, if set, is left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # (glibc's malloc.h)
MMAP_THRESHOLD = 128 * 1024

_done = False


def pin_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at 128 KiB, once per process; False where there is no
    glibc (musl, macOS) or the environment chose a threshold itself."""
    global _done
    if _done:
        return True
    _done = True
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = bool(mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD)))
    if not ok:
        log.debug("mallopt(M_MMAP_THRESHOLD) refused")
    return ok
