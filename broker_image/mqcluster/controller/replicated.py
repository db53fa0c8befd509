"""The controller state as a Raft state machine: entries are event batches."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mqcluster.controller.events import Event, EventDecodeError, decode_events
from mqcluster.controller.statemachine import ControllerState

log = logging.getLogger(__name__)

NORMAL_ENTRY = 0


class ControllerStateMachine:
    """``apply(entry)`` decodes the entry's event batch and applies it; returns the count.

    ``entry`` is a Raft entry (``.type``, ``.data``) or raw bytes. Non-normal
    entries (no-ops, membership) and undecodable data are skipped, so a log
    always replays.
    """

    def __init__(
        self,
        state: ControllerState | None = None,
        on_applied: Callable[[list[Event]], None] | None = None,
    ) -> None:
        self.state = state if state is not None else ControllerState()
        self.on_applied = on_applied
        self.applied_entries = 0
        self._proposed: dict[bytes, list[Event]] = {}

    def remember(self, data: bytes, events: list[Event]) -> None:
        """The proposer already holds the events of ``data``: apply them without decoding."""
        self._proposed[data] = events

    def forget(self, data: bytes) -> None:
        self._proposed.pop(data, None)

    def apply(self, entry: Any) -> int:
        if isinstance(entry, bytes | bytearray):
            data = bytes(entry)
        else:
            if int(getattr(entry, "type", NORMAL_ENTRY)) != NORMAL_ENTRY:
                return 0
            data = bytes(getattr(entry, "data", b""))
        self.applied_entries += 1
        if not data:
            return 0
        known = self._proposed.pop(data, None)
        if known is not None:
            events = known
        else:
            try:
                events = decode_events(data)
            except EventDecodeError as exc:
                log.error("skipping undecodable controller log entry: %s", exc)
                return 0
        self.state.apply_all(events)
        if self.on_applied is not None and events:
            self.on_applied(events)
        return len(events)

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def restore(self, data: bytes) -> None:
        self.state.restore(data)
