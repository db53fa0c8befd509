"""Every broker group the proxy serves: its master, and whether the proxy can reach it.

Pure bookkeeping (no I/O; time passed in): discovery reports masters (``sighted``),
the health probe and forwarded calls report answers and timeouts; the handler asks
which groups are usable. A group is usable while its master's gRPC endpoint is known
and fewer than ``failures_to_down`` consecutive probes or calls failed. A new master
starts usable (the controllers just saw it alive); a newer master epoch always wins
over an older one (a controller that has not caught up).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace

UP, DOWN, NO_MASTER = "UP", "DOWN", "NO_MASTER"


@dataclass(frozen=True)
class GroupState:
    name: str
    master_addr: str | None = None
    grpc: str | None = None
    epoch: int = -1
    failures: int = 0
    down_reason: str = ""
    changed_at: float = 0.0

    def health(self, failures_to_down: int) -> str:
        if not self.grpc:
            return NO_MASTER
        return DOWN if self.failures >= failures_to_down else UP


Listener = Callable[[GroupState | None, GroupState], None]


@dataclass
class GroupTable:
    failures_to_down: int = 2
    clock: Callable[[], float] = field(default=lambda: 0.0)
    groups: dict[str, GroupState] = field(default_factory=dict)
    listeners: list[Listener] = field(default_factory=list)
    """Told of every master change: (old state or None, new state)."""
    _changed: asyncio.Event | None = None

    # ---- what discovery reports

    def sighted(self, name: str, master_addr: str | None, grpc: str | None,
                epoch: int) -> bool:
        """A master seen by discovery; True when it is a change (listeners are told)."""
        old = self.groups.get(name)
        if old is not None and epoch < old.epoch:
            return False
        if old is not None and (master_addr, grpc) == (old.master_addr, old.grpc):
            if epoch != old.epoch:
                self.groups[name] = replace(old, epoch=epoch)
            return False
        new = GroupState(name, master_addr, grpc, epoch, changed_at=self.clock())
        self.groups[name] = new
        for listener in self.listeners:
            listener(old, new)
        self._wake()
        return True

    def forget(self, name: str) -> None:
        if self.groups.pop(name, None) is not None:
            self._wake()

    # ---- what probes and calls report

    def answered(self, name: str, grpc: str) -> None:
        state = self.groups.get(name)
        if state is not None and state.grpc == grpc and state.failures:
            self.groups[name] = replace(state, failures=0, down_reason="")
            self._wake()

    def failed(self, name: str, grpc: str, why: str) -> None:
        """A probe or call to ``grpc`` failed; counts only against the current master."""
        state = self.groups.get(name)
        if state is None or state.grpc != grpc:
            return
        self.groups[name] = replace(state, failures=state.failures + 1, down_reason=why)
        if self.groups[name].health(self.failures_to_down) == DOWN:
            self._wake()

    # ---- what the handler asks

    def state(self, name: str) -> GroupState | None:
        return self.groups.get(name)

    def usable(self, name: str) -> str | None:
        """The gRPC endpoint of ``name``'s master if the proxy can use it now."""
        state = self.groups.get(name)
        if state is None or state.health(self.failures_to_down) != UP:
            return None
        return state.grpc

    def usable_groups(self) -> list[str]:
        return sorted(g for g in self.groups if self.usable(g))

    def names(self) -> list[str]:
        return sorted(self.groups)

    def health(self) -> dict[str, str]:
        return {g: s.health(self.failures_to_down) for g, s in sorted(self.groups.items())}

    async def wait_change(self, timeout: float) -> bool:
        """Wait for any change (a master, a health verdict); False on timeout."""
        if self._changed is None:
            self._changed = asyncio.Event()
        event = self._changed
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None
