"""How often the server processes run CPython's cyclic garbage collector.

A server's per-request objects are freed by reference counting: they make almost no
reference cycles. CPython still runs a young-generation collection after every 700 net
container allocations, promotes the requests then in flight, and now and then scans
every object alive in a full collection, which stalls a broker for tens of
milliseconds; on a replicated master under load that is CPU spent on every message
(``python -m bench peers`` prints the CPU per message). So the servers collect the
young generation far less often, and move what
start-up built into the permanent generation (``gc.freeze``), where full collections
no longer scan it.

``MQCLUSTER_GC_THRESHOLD`` sets the young generation's threshold (CPython's own default
is 700).
"""

from __future__ import annotations

import gc
import os

ENV = "MQCLUSTER_GC_THRESHOLD"
DEFAULT_THRESHOLD = 50_000
# Older generations: collected after this many collections of the one below.
OLDER_THRESHOLDS = (50, 100)


class GcThresholdError(ValueError):
    """The environment sets a threshold that is not a positive whole number."""


def threshold(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The young generation's threshold the environment asks for."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_THRESHOLD
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise GcThresholdError(f"{ENV}={environ[ENV]!r} is not a positive whole number")
    return value


def apply(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Set the collector's thresholds for a server process."""
    gc.set_threshold(threshold(environ), *OLDER_THRESHOLDS)


def freeze_startup() -> None:
    """Once a server is up: free start-up's garbage, keep the rest out of later scans."""
    gc.collect()
    gc.freeze()
