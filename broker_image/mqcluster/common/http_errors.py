"""Malformed HTTP requests to the metrics and health endpoints, logged as one line.

aiohttp logs every request it cannot parse at ERROR with a traceback
("Error handling request"), so anyone who reaches the metrics port can fill the log
with tracebacks. Such a request is the client's fault: the server has already answered
400 and goes on serving. The filter drops those records and logs a one-line warning
instead, at most one per interval with the count of the rest.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

from mqcluster.wire.ratelog import RateLimitedLog

log = logging.getLogger("mqcluster.http")
_installed = False


class BadRequestFilter(logging.Filter):
    def __init__(self, limited: RateLimitedLog) -> None:
        super().__init__()
        self.limited = limited

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.limited.warning("bad-http", "malformed HTTP request refused (400): %s",
                             first_line[:200])
        return False


def quiet_bad_requests() -> None:
    """Install the filter on aiohttp's server logger (once per process)."""
    global _installed
    if not _installed:
        logging.getLogger("aiohttp.server").addFilter(BadRequestFilter(RateLimitedLog(log)))
        _installed = True
