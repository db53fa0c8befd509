"""What the operator last applied, so a resync that would apply the same object again
skips the request; every object is still applied again at least every ``max_age``
seconds, which corrects changes others made to the fields the operator owns."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any


class AppliedCache:
    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self._clock = clock
        self._last: dict[tuple[str, str, str, str], tuple[str, float]] = {}

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
        meta = obj.get("metadata") or {}
        return (str(obj.get("apiVersion")), str(obj.get("kind")),
                str(meta.get("namespace", "")), str(meta.get("name", "")))

    @staticmethod
    def _digest(obj: Mapping[str, Any]) -> str:
        return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()

    def fresh(self, obj: Mapping[str, Any]) -> bool:
        """Whether exactly ``obj`` was applied less than ``max_age`` seconds ago."""
        last = self._last.get(self._key(obj))
        return last is not None and last[0] == self._digest(obj) and \
            self._clock() - last[1] < self.max_age

    def remember(self, obj: Mapping[str, Any]) -> None:
        self._last[self._key(obj)] = (self._digest(obj), self._clock())

    def forget(self, obj: Mapping[str, Any]) -> None:
        self._last.pop(self._key(obj), None)
