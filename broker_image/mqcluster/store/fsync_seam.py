"""The store's fsync, with a seam that makes the disk slow for fault injection.

Every commitlog and consume-queue fsync of a broker's store goes through the
function ``fsync_from_env()`` returns. When the environment variable
``MQCLUSTER_FSYNC_DELAY_FILE`` names a file, each fsync first sleeps for the number
of milliseconds that file holds (re-read at most every 100 ms, so a chaos runner can
slow the disk down and speed it up while the broker runs; 0 or no file: no delay).
Unset, it is plain ``os.fsync``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from mqcluster.common.knob import FileKnob

ENV = "MQCLUSTER_FSYNC_DELAY_FILE"

FsyncFn = Callable[[int], None]


def delayed_fsync(delay_ms: FileKnob, fsync: FsyncFn = os.fsync,
                  sleep: Callable[[float], None] = time.sleep) -> FsyncFn:
    def slow_fsync(fd: int) -> None:
        ms = delay_ms.value()
        if ms > 0:
            sleep(ms / 1000)  # fsyncs run on worker threads, as a slow disk would hold them
        fsync(fd)

    return slow_fsync


def fsync_from_env(environ: Mapping[str, str] = os.environ) -> FsyncFn:
    path = environ.get(ENV)
    return delayed_fsync(FileKnob(path)) if path else os.fsync
