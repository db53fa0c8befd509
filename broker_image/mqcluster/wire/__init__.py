"""Framing and RPC of the internal RocketMQ-remoting-style TCP protocol."""

from mqcluster.wire.frame import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    ResponseCode,
    encode_frame,
)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameDecoder",
    "FrameError",
    "RemotingCommand",
    "ResponseCode",
    "encode_frame",
]
