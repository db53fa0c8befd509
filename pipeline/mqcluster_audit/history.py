"""The JSON-lines histories producers and consumers write, one event per line:

    {"event": "send"|"ack"|"fail"|"receive", "client": "p1", "time_ms": 1700000000000,
     "topic": "T", "key": "k42", "msg_id": "...", "group": null, "message_group": null,
     "seq": 42}

``send``: a send was attempted; ``ack``: the broker acknowledged it (``msg_id`` set);
``fail``: the client gave up on it; ``receive``: a consumer of ``group`` received the
message with ``key``. ``seq`` orders a producer's sends within a FIFO ``message_group``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

EVENTS = frozenset({"send", "ack", "fail", "receive"})
SCHEMA = pa.schema([
    ("event", pa.string()), ("client", pa.string()), ("time_ms", pa.int64()),
    ("topic", pa.string()), ("key", pa.string()), ("msg_id", pa.string()),
    ("group", pa.string()), ("message_group", pa.string()), ("seq", pa.int64()),
    ("line", pa.int64()), ("source", pa.string()), ("error", pa.string()),
])


class HistoryWriter:
    def __init__(self, out: IO[str], client: str) -> None:
        self.out = out
        self.client = client

    def write(self, event: str, key: str, **fields: Any) -> None:
        if event not in EVENTS:
            raise ValueError(f"unknown history event {event!r}")
        record = {"event": event, "client": self.client, "time_ms": int(time.time() * 1000),
                  "key": key, **fields}
        self.out.write(json.dumps(record, separators=(",", ":")) + "\n")


def read_history(path: Path) -> pa.RecordBatch:
    """A history file as rows; a line that is not a valid event becomes a row with
    ``error`` set, never a failed job."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or rec.get("event") not in EVENTS:
                raise ValueError("not a history event")
            rows.append({k: rec.get(k) for k in SCHEMA.names if k not in
                         ("line", "source", "error")} | {"line": n, "source": path.name,
                                                          "error": None})
        except (ValueError, TypeError) as exc:
            rows.append({"line": n, "source": path.name, "error": str(exc)})
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
