"""A tiny replicated state machine: an append-only log of values with a running digest.

Every member computes the same ``count`` and ``digest`` (a CRC32 chained over all
values in order), so comparing two members is comparing two numbers. The most
recent ``keep`` values are kept (cut to ``keep_bytes`` each) so tests can read
them back; benchmarks keep few to stay small.
"""

from __future__ import annotations

import json
import zlib
from collections import deque
from typing import Any

from mqcluster.raft.types import Entry


class ValueLog:
    def __init__(self, keep: int = 100_000, keep_bytes: int = 256) -> None:
        self.keep = keep
        self.keep_bytes = keep_bytes
        self.count = 0
        self.digest = 0
        self.values: deque[bytes] = deque(maxlen=keep)

    def apply(self, entry: Entry) -> int:
        """Append the entry's value; the result is its 1-based position."""
        data = entry.data
        self.count += 1
        self.digest = zlib.crc32(data, self.digest)
        self.values.append(data[: self.keep_bytes])
        return self.count

    @property
    def first_kept(self) -> int:
        """Position of the oldest value still held."""
        return self.count - len(self.values) + 1

    def read(self, start: int, limit: int) -> list[bytes]:
        """Up to ``limit`` kept values from position ``start`` (1-based)."""
        lo = max(start, self.first_kept) - self.first_kept
        return [self.values[i] for i in range(lo, min(lo + limit, len(self.values)))]

    def snapshot(self) -> bytes:
        return json.dumps(self.summary() | {
            "values": [v.decode("latin-1") for v in self.values],
        }).encode()

    def restore(self, data: bytes) -> None:
        doc = json.loads(data)
        self.count, self.digest = int(doc["count"]), int(doc["digest"])
        self.values = deque((v.encode("latin-1") for v in doc["values"]), maxlen=self.keep)

    def summary(self) -> dict[str, Any]:
        return {"count": self.count, "digest": self.digest, "first": self.first_kept}
