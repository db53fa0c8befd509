"""Base for the JSON metadata files under ``config/`` (RocketMQ's ``ConfigManager``)."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

from mqcluster.store.atomic import atomic_write, read_file

log = logging.getLogger(__name__)


class JsonConfigFile:
    """Loads ``<config_dir>/<file_name>``, falls back to ``.bak``, persists atomically.

    Subclasses implement ``encode()`` and ``decode()``; a ``.bak`` copy of the previous
    version is kept, as RocketMQ does.
    """

    file_name = ""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, self.file_name)
        self._lock = threading.Lock()

    def encode(self) -> dict[str, Any]:
        raise NotImplementedError

    def decode(self, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def load(self) -> bool:
        """Load the file (or its backup); ``False`` when neither exists."""
        for candidate in (self.path, self.path + ".bak"):
            raw = read_file(candidate)
            if raw is None or not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except ValueError:
                log.error("config file %s is not valid JSON; trying its backup", candidate)
                continue
            self.decode(data)
            return True
        return False

    def to_json(self) -> str:
        return json.dumps(self.encode(), indent=4, sort_keys=True)

    def persist(self) -> None:
        with self._lock:
            text = self.to_json().encode("utf-8")
            current = read_file(self.path)
            if current is not None:
                atomic_write(self.path + ".bak", current)
            atomic_write(self.path, text)


class DataVersion:
    """RocketMQ's ``dataVersion``: a timestamp and a counter bumped on every change."""

    def __init__(self, timestamp: int = 0, counter: int = 0) -> None:
        self.timestamp = timestamp
        self.counter = counter

    def next(self, now_ms: int) -> None:
        self.timestamp = now_ms
        self.counter += 1

    def to_dict(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> DataVersion:
        d = d or {}
        return cls(int(d.get("timestamp", 0)), int(d.get("counter", 0)))
