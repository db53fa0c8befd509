"""The wall clock of broker and controller processes, with a seam for clock jumps.

``wall_time()`` is ``time.time()`` plus the offset, in milliseconds, held by the file
that the environment variable ``MQCLUSTER_CLOCK_OFFSET_FILE`` names when the process
starts (re-read at most every 100 ms; a chaos runner writes +60000 to jump a minute
ahead, 0 to come back). Unset, it is ``time.time`` itself. It serves what a real clock
jump moves: store and born timestamps, the time a popped message becomes visible
again, retention, the controller's election records. Timeouts use ``time.monotonic``,
which a jump of the wall clock leaves alone, and so does this seam.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from mqcluster.common.knob import FileKnob

ENV = "MQCLUSTER_CLOCK_OFFSET_FILE"


def offset_clock(offset_ms: FileKnob,
                 clock: Callable[[], float] = time.time) -> Callable[[], float]:
    def now() -> float:
        return clock() + offset_ms.value() / 1000

    return now


def wall_clock_from_env(environ: Mapping[str, str] = os.environ) -> Callable[[], float]:
    path = environ.get(ENV)
    return offset_clock(FileKnob(path)) if path else time.time


wall_time: Callable[[], float] = wall_clock_from_env()
"""Seconds since the epoch, as ``time.time``, shifted when the seam is set."""


def wall_ms() -> int:
    return int(wall_time() * 1000)
