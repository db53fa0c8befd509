"""Resource limits of a remoting listener, and the process-wide defaults.

Every ``RpcServer`` enforces one ``ServerLimits``: the largest frame it reads, how many
connections it keeps, how many bytes of partial frames it holds across all of them,
how long a connection may stay idle and how long a frame may take to arrive whole.
A connection past a limit is refused or closed; the server goes on serving the others.

A listener built without explicit limits (a Raft runner's own server, say) takes the
process's defaults, which a server process sets once at start-up from its config
(``set_process_limits``), so every port of the process obeys the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqcluster.wire.frame import DEFAULT_MAX_FRAME_SIZE

FRAME_PREFIX = 4
"""Bytes of a frame's length prefix: a frame is its length plus these."""
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_LISTEN_BACKLOG = 1024  # RocketMQ's serverSocketBacklog
DEFAULT_MAX_PARTIAL_BYTES = 24 * 1024 * 1024
DEFAULT_IDLE_SECONDS = 120.0  # RocketMQ's serverChannelMaxIdleTimeSeconds
DEFAULT_FRAME_DEADLINE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Limits of one listener; 0 for ``idle_seconds`` or ``frame_deadline_seconds`` means
    no limit of that kind."""

    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    """Largest frame accepted (its 4-byte length prefix counts everything after it)."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Connections kept open at once; one more is closed as soon as it is accepted."""
    max_partial_bytes: int = DEFAULT_MAX_PARTIAL_BYTES
    """Bytes of incomplete frames held across all the server's connections."""
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    """A connection that sends nothing and has no request being served is closed."""
    frame_deadline_seconds: float = DEFAULT_FRAME_DEADLINE_SECONDS
    """A frame must arrive whole within this many seconds of its first byte."""
    listen_backlog: int = DEFAULT_LISTEN_BACKLOG
    """Connections the kernel queues for accepting. (asyncio's own 100 is small: a burst
    of connections past it has its handshakes dropped and retried for up to a minute.)"""

    def __post_init__(self) -> None:
        for name in ("max_frame_size", "max_connections", "max_partial_bytes",
                     "listen_backlog"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("idle_seconds", "frame_deadline_seconds"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.max_partial_bytes < self.max_frame_size + FRAME_PREFIX:
            # Otherwise a frame of the largest allowed size could never be read.
            raise ValueError(
                f"max_partial_bytes {self.max_partial_bytes} cannot hold a frame of "
                f"max_frame_size {self.max_frame_size} (needs {FRAME_PREFIX} more for "
                f"its length prefix)")


_process_limits = ServerLimits()


def set_process_limits(limits: ServerLimits) -> None:
    """The limits of every listener of this process built without its own."""
    global _process_limits
    _process_limits = limits


def process_limits() -> ServerLimits:
    return _process_limits
