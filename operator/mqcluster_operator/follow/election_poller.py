"""Shared election polling: one request per controller cluster per interval, for all groups.

Every BrokerGroup follower subscribes to its broker name on the ``SharedPoller``
of its ``ProbeTarget`` (the controllers it belongs to, or its own pods' health
endpoints). The poller asks its probe about every subscribed name in one
request (RIP-44 GET_SYNC_STATE_DATA takes a list of broker names), keeps the
latest answer per name and wakes the subscribers whose answer changed. On
errors it backs off exponentially up to ``max_backoff``; with no subscribers
left it stops and closes its probe. ``hurry`` (a pod of a group changed readiness, the
operator asked for a handover) polls at once and then every ``fast_interval`` for a
few seconds: the brokers' health endpoints, polled every 2 s otherwise, are read every
50 ms while an election may be under way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable

from mqcluster.protocol.election import Election

from .election_plan import ControllerProbe, ProbeError
from .election_probes import ProbeTarget

log = logging.getLogger(__name__)

ProbeFactory = Callable[[ProbeTarget], ControllerProbe]
Latest = Election | ProbeError | None
HURRY_SECONDS = 5.0
"""How long a poller polls at its fast interval after ``hurry``: a DLedger election
takes a few hundred milliseconds, a restarted pod a few seconds to rejoin."""
HEALTH_HURRY_INTERVAL = 0.05
"""The fast interval of a group's health endpoints (a few local GETs, only while hurried);
controllers keep their own interval, which is already short."""


class Subscription:
    """One follower's view of one broker group; ``changed`` is set when its answer changes."""

    def __init__(self, poller: SharedPoller, broker_name: str) -> None:
        self.poller = poller
        self.broker_name = broker_name
        self.changed = asyncio.Event()

    @property
    def probe(self) -> ControllerProbe:
        return self.poller.probe

    @property
    def latest(self) -> Latest:
        """The last answer for this group, the poll's error, or None before the first poll."""
        return self.poller.latest(self.broker_name)

    async def close(self) -> None:
        await self.poller.unsubscribe(self)


class SharedPoller:
    def __init__(
        self, probe: ControllerProbe, interval: float, max_backoff: float,
        on_idle: Callable[[SharedPoller], None] | None = None,
        fast_interval: float | None = None, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe = probe
        self.interval = interval
        self.fast_interval = min(interval, fast_interval or interval)
        self._clock = clock
        self._hurry_until = float("-inf")
        self.max_backoff = max(max_backoff, interval)
        self.polls = 0
        self.failures = 0
        self._on_idle = on_idle
        self._subs: dict[str, set[Subscription]] = {}
        self._results: dict[str, Election] = {}
        self._error: ProbeError | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def latest(self, broker_name: str) -> Latest:
        if self._error is not None:
            return self._error
        return self._results.get(broker_name)

    def subscribe(self, broker_name: str) -> Subscription:
        if self._closed:
            raise RuntimeError("poller closed")
        sub = Subscription(self, broker_name)
        self._subs.setdefault(broker_name, set()).add(sub)
        if broker_name in self._results or self._error is not None:
            sub.changed.set()
        if self.failures == 0:
            self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="election-poller")
        return sub

    async def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.broker_name)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.broker_name]
                self._results.pop(sub.broker_name, None)
        if not self._subs:
            if self._on_idle is not None:
                self._on_idle(self)
            await self.close()

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.probe.close()

    def hurry(self, seconds: float = HURRY_SECONDS) -> None:
        """Poll now, then every ``fast_interval`` for ``seconds``."""
        self._hurry_until = max(self._hurry_until, self._clock() + seconds)
        self._wake.set()

    def delay(self) -> float:
        if self.failures == 0:
            return self.fast_interval if self._clock() < self._hurry_until else self.interval
        return float(min(self.max_backoff, self.interval * 2 ** self.failures))

    async def poll_once(self) -> None:
        names = sorted(self._subs)
        if not names:
            return
        self.polls += 1
        started = time.monotonic()
        try:
            answers = await self.probe.elections(names)
        except Exception as exc:
            error = exc if isinstance(exc, ProbeError) else ProbeError(f"probe: {exc!r}")
            if self.failures == 0:
                log.warning("election poll failed: %s", error)
            self.failures += 1
            self._publish_error(error)
            return
        self.failures = 0
        log.debug("polled %d groups in %.3f s", len(names), time.monotonic() - started)
        recovered, self._error = self._error is not None, None
        changed = []
        for name in names:
            election = answers.get(name) or Election(None)
            if recovered or self._results.get(name) != election:
                self._results[name] = election
                self._notify(name)
                changed.append(name)
        if changed and log.isEnabledFor(logging.DEBUG):
            log.debug("changed at %.3f: %s", time.time(), " ".join(changed))

    def _publish_error(self, error: ProbeError) -> None:
        previous, self._error = self._error, error
        if previous is None or str(previous) != str(error):
            for name in self._subs:
                self._notify(name)

    def _notify(self, name: str) -> None:
        for sub in self._subs.get(name, ()):
            sub.changed.set()

    async def _run(self) -> None:
        while self._subs and not self._closed:
            self._wake.clear()
            await self.poll_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.delay())


class ElectionHub:
    """One SharedPoller per ProbeTarget, created on the first subscription, dropped when idle.

    ``interval`` is the poll period for controller targets; groups read through
    their pods' health endpoints are polled every ``health_interval``.
    """

    def __init__(
        self, factory: ProbeFactory, interval: float, health_interval: float | None = None,
        max_backoff: float = 5.0,
    ) -> None:
        self.factory = factory
        self.interval = interval
        self.health_interval = health_interval or interval
        self.max_backoff = max_backoff
        self.pollers: dict[ProbeTarget, SharedPoller] = {}

    def subscribe(self, target: ProbeTarget, broker_name: str) -> Subscription:
        poller = self.pollers.get(target)
        if poller is None:
            interval = self.interval if target.controller_addrs else self.health_interval
            fast = self.interval if target.controller_addrs \
                else min(self.interval, HEALTH_HURRY_INTERVAL)
            poller = SharedPoller(self.factory(target), interval, self.max_backoff,
                                  on_idle=functools.partial(self._forget, target),
                                  fast_interval=fast)
            self.pollers[target] = poller
        return poller.subscribe(broker_name)

    def _forget(self, target: ProbeTarget, poller: SharedPoller) -> None:
        if self.pollers.get(target) is poller:
            del self.pollers[target]

    async def close(self) -> None:
        pollers, self.pollers = list(self.pollers.values()), {}
        for poller in pollers:
            await poller.close()
