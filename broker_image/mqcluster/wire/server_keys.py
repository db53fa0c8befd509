"""The configuration keys of a remoting server's limits (``ServerLimits``), shared by the
name server, broker and controller models.

=================================  =========  ==============================================
key                                default    meaning
=================================  =========  ==============================================
serverFrameMaxLength               16 MiB     largest frame read (RocketMQ: the system
                                              property ``com.rocketmq.remoting.frameMaxLength``)
serverMaxConnections               4096       connections open at once per listener
serverPartialFramesMaxBytes        24 MiB     bytes of incomplete frames held across all the
                                              connections of a listener (at least the
                                              largest frame and its 4-byte length)
serverChannelMaxIdleTimeSeconds    120        a connection with nothing read and nothing being
                                              served for this long is closed (RocketMQ's key);
                                              0: never
serverFrameReadTimeoutSeconds      30         a frame must arrive whole within this many
                                              seconds of its first byte; 0: no deadline
serverSocketBacklog                1024       connections the kernel queues for accepting
                                              (RocketMQ's key)
=================================  =========  ==============================================
"""

from __future__ import annotations

from pydantic import Field, model_validator

from mqcluster.common.config import RocketConfig
from mqcluster.common.javaints import INT32_MAX
from mqcluster.wire.frame import DEFAULT_MAX_FRAME_SIZE
from mqcluster.wire.limits import (
    DEFAULT_FRAME_DEADLINE_SECONDS,
    DEFAULT_IDLE_SECONDS,
    DEFAULT_LISTEN_BACKLOG,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PARTIAL_BYTES,
    FRAME_PREFIX,
    ServerLimits,
)

MIN_FRAME_MAX_LENGTH = 1024
MAX_FRAME_MAX_LENGTH = INT32_MAX  # (Java's int: RocketMQ's frame length field)


class ServerLimitKeys(RocketConfig):
    serverFrameMaxLength: int | None = Field(
        default=None, ge=MIN_FRAME_MAX_LENGTH, le=MAX_FRAME_MAX_LENGTH)
    """Bytes; unset: ``default_frame_max_length()`` (16 MiB, or what a broker's
    maxMessageSize needs)."""
    serverMaxConnections: int = Field(default=DEFAULT_MAX_CONNECTIONS, ge=1)
    serverPartialFramesMaxBytes: int | None = Field(default=None, ge=MIN_FRAME_MAX_LENGTH)
    """Bytes; unset: 24 MiB, or what the largest frame needs if that is more."""
    serverChannelMaxIdleTimeSeconds: int = Field(default=int(DEFAULT_IDLE_SECONDS), ge=0)
    serverFrameReadTimeoutSeconds: int = Field(
        default=int(DEFAULT_FRAME_DEADLINE_SECONDS), ge=0)
    serverSocketBacklog: int = Field(default=DEFAULT_LISTEN_BACKLOG, ge=1, le=65535)

    def default_frame_max_length(self) -> int:
        return DEFAULT_MAX_FRAME_SIZE

    @property
    def frame_max_length(self) -> int:
        """The largest frame read: ``serverFrameMaxLength`` or its default."""
        return self.serverFrameMaxLength or self.default_frame_max_length()

    @property
    def partial_frames_max_bytes(self) -> int:
        """``serverPartialFramesMaxBytes`` or its default."""
        return self.serverPartialFramesMaxBytes or max(DEFAULT_MAX_PARTIAL_BYTES,
                                                       self.frame_max_length + FRAME_PREFIX)

    def server_limits(self) -> ServerLimits:
        return ServerLimits(
            max_frame_size=self.frame_max_length,
            max_connections=self.serverMaxConnections,
            max_partial_bytes=self.partial_frames_max_bytes,
            idle_seconds=float(self.serverChannelMaxIdleTimeSeconds),
            frame_deadline_seconds=float(self.serverFrameReadTimeoutSeconds),
            listen_backlog=self.serverSocketBacklog,
        )

    @model_validator(mode="after")
    def _partial_budget_holds_a_frame(self) -> ServerLimitKeys:
        budget = self.serverPartialFramesMaxBytes
        if budget is not None and budget < self.frame_max_length + FRAME_PREFIX:
            # Otherwise a frame of the largest allowed size could never be read.
            raise ValueError(
                f"serverPartialFramesMaxBytes={budget} must be at least the largest frame "
                f"(serverFrameMaxLength={self.frame_max_length}) and its {FRAME_PREFIX}-byte "
                f"length")
        return self
