"""Receipt handles: which queue entry a delivery is, and until when it is invisible.

A handle is text: ``1~topic~queue~offset~popTime~invisibleMs~epoch~broker~crc``.
``topic`` is the topic of the queue the message was read from (a ``%RETRY%`` topic
for redeliveries), ``epoch`` tells one delivery of an entry from the next (a handle
from an earlier delivery or from before a ChangeInvisibleDuration is stale), and the
CRC-32 of everything before it catches truncated or altered handles.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from mqcluster.broker.messaging.errors import Code, MessagingError

_VERSION = "1"
_SEP = "~"
_FIELDS = 9


@dataclass(frozen=True)
class ReceiptHandle:
    topic: str
    queue_id: int
    offset: int
    pop_time_ms: int
    invisible_ms: int
    epoch: int
    broker_name: str

    @property
    def deadline_ms(self) -> int:
        return self.pop_time_ms + self.invisible_ms

    def encode(self) -> str:
        body = _SEP.join((
            _VERSION, self.topic, str(self.queue_id), str(self.offset),
            str(self.pop_time_ms), str(self.invisible_ms), str(self.epoch), self.broker_name,
        ))
        return f"{body}{_SEP}{zlib.crc32(body.encode()):08x}"

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Parse a handle; anything malformed raises INVALID_RECEIPT_HANDLE."""
        if not text:
            raise MessagingError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is empty")
        body, sep, crc = text.rpartition(_SEP)
        try:
            valid_crc = bool(sep) and int(crc, 16) == zlib.crc32(body.encode())
        except ValueError:
            valid_crc = False
        if not valid_crc:
            raise MessagingError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is corrupted")
        parts = body.split(_SEP)
        if len(parts) < _FIELDS - 1 or parts[0] != _VERSION:
            raise MessagingError(Code.INVALID_RECEIPT_HANDLE, "unknown receipt handle format")
        try:
            return cls(
                topic=parts[1],
                queue_id=int(parts[2]),
                offset=int(parts[3]),
                pop_time_ms=int(parts[4]),
                invisible_ms=int(parts[5]),
                epoch=int(parts[6]),
                broker_name=_SEP.join(parts[7:]),
            )
        except ValueError as exc:
            raise MessagingError(
                Code.INVALID_RECEIPT_HANDLE, "receipt handle has a non-numeric field"
            ) from exc
