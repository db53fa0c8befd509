"""Message ids in the v1 layout the RocketMQ 5 clients use (docs/formats.md, "Message id")."""

from __future__ import annotations

import itertools
import os
import struct
import uuid

_EPOCH_2021_S = 1_609_459_200


class MessageIdGenerator:
    def __init__(self) -> None:
        mac = uuid.getnode().to_bytes(8, "big")[-6:]
        pid = (os.getpid() & 0xFFFF).to_bytes(2, "big")
        self._prefix = "01" + (mac + pid).hex().upper()
        self._seq = itertools.count()

    def next(self, now_ms: int) -> str:
        secs = (now_ms // 1000 - _EPOCH_2021_S) & 0xFFFFFFFF
        seq = next(self._seq) & 0xFFFFFFFF
        return self._prefix + struct.pack(">II", secs, seq).hex().upper()
