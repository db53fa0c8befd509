"""Base for the JSON metadata files under ``config/`` (RocketMQ's ``ConfigManager``)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any, ClassVar, Generic, TypeVar

from mqcluster.common.files import atomic_write, read_file

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


class TableEntry:
    """A dataclass row of a versioned table, serialized with RocketMQ's field names."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload, no-any-return]

    @classmethod
    def from_dict(cls: type[E], d: dict[str, Any]) -> E:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in d.items() if k in known})


E = TypeVar("E", bound=TableEntry)


class VersionedTable(JsonConfigFile, Generic[E]):
    """A name -> entry table with a dataVersion; every change is persisted before returning.

    Subclasses name the JSON file, the table's key in it, the entry type and the
    field holding an entry's name.
    """

    table_key: ClassVar[str] = ""
    name_field: ClassVar[str] = ""
    entry_type: type[E]

    def __init__(self, config_dir: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(config_dir)
        self._clock = clock
        self.table: dict[str, E] = {}
        self.data_version = DataVersion()

    def get(self, name: str) -> E | None:
        return self.table.get(name)

    def put(self, entry: E) -> None:
        self.table[getattr(entry, self.name_field)] = entry
        self._changed()

    def delete(self, name: str) -> bool:
        if self.table.pop(name, None) is None:
            return False
        self._changed()
        return True

    def _changed(self) -> None:
        self.data_version.next(int(self._clock() * 1000))
        self.persist()

    def encode(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_dict(),
            self.table_key: {n: e.to_dict() for n, e in sorted(self.table.items())},
        }

    def decode(self, data: dict[str, Any]) -> None:
        rows = data.get(self.table_key) or {}
        self.table = {
            n: self.entry_type.from_dict({self.name_field: n, **row}) for n, row in rows.items()
        }
        self.data_version = DataVersion.from_dict(data.get("dataVersion"))
