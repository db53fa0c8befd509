"""``mqcluster local status --watch``: a live view of every local group: who is master,
the epoch (or Raft term), the in-sync replicas, each replica's role and commitlog end,
and the produce and consume rates read from the brokers' /metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .inspect import group_state
from .runner import Running

CLEAR = "\x1b[H\x1b[2J"


@dataclass(frozen=True)
class Scrape:
    """What one broker's /metrics said."""

    is_master: bool | None = None
    max_offset: int | None = None
    messages_in: float = 0.0
    messages_out: float = 0.0


@dataclass(frozen=True)
class ReplicaView:
    name: str
    alive: bool
    scrape: Scrape | None
    """None: the process is gone or its /metrics did not answer."""


@dataclass(frozen=True)
class GroupView:
    group: str
    mode: str
    master: str | None
    epoch: int
    in_sync: tuple[str, ...]
    replicas: tuple[ReplicaView, ...]
    error: str | None = None
    """Why the group's leader could not be asked (the other fields are then empty)."""

    def headline(self) -> tuple[str | None, int, tuple[str, ...]]:
        """What a failover changes."""
        return self.master, self.epoch, self.in_sync


@dataclass
class Rates:
    """Messages per second in and out of each group, from the counters of two looks."""

    last: dict[str, tuple[float, dict[str, Scrape]]] = field(default_factory=dict)

    def update(self, view: GroupView, now: float) -> tuple[float, float] | None:
        scrapes = {r.name: r.scrape for r in view.replicas if r.scrape is not None}
        before = self.last.get(view.group)
        self.last[view.group] = (now, scrapes)
        if before is None or now <= before[0]:
            return None
        then, old = before
        # per replica, and never below zero: a killed replica's counters are gone and a
        # restarted one's start again
        ins = sum(max(0.0, s.messages_in - old[n].messages_in)
                  for n, s in scrapes.items() if n in old)
        outs = sum(max(0.0, s.messages_out - old[n].messages_out)
                   for n, s in scrapes.items() if n in old)
        return ins / (now - then), outs / (now - then)


def parse_metrics(text: str) -> Scrape:
    is_master, max_offset, ins, outs = None, None, 0.0, 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "rocketmq_broker_is_master":
                is_master = s.value == 1
            elif s.name == "rocketmq_commitlog_max_offset":
                max_offset = int(s.value)
            elif s.name == "rocketmq_messages_in_total":
                ins += s.value
            elif s.name == "rocketmq_messages_out_total":
                outs += s.value
    return Scrape(is_master, max_offset, ins, outs)


async def scrape(session: aiohttp.ClientSession, replica: Running) -> Scrape | None:
    host = replica.props.get("metricsPromExporterHost") or replica.ip
    port = replica.props.get("metricsPromExporterPort")
    if not port or not replica.alive:
        return None
    try:
        async with session.get(f"http://{host}:{port}/metrics",
                               timeout=aiohttp.ClientTimeout(total=1.0)) as resp:
            return parse_metrics(await resp.text()) if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


def broker_groups(processes: Sequence[Running]) -> dict[str, list[Running]]:
    groups: dict[str, list[Running]] = {}
    for p in processes:
        if p.kind == "broker":
            groups.setdefault(p.group, []).append(p)
    return groups


async def look(processes: Sequence[Running]) -> list[GroupView]:
    views = []
    async with aiohttp.ClientSession() as session:
        for group, replicas in broker_groups(processes).items():
            scrapes = await asyncio.gather(*(scrape(session, r) for r in replicas))
            rviews = tuple(ReplicaView(r.name, r.alive, s)
                           for r, s in zip(replicas, scrapes, strict=True))
            try:
                st = await group_state(replicas)
            except Exception as exc:  # the controllers are starting or gone
                views.append(GroupView(group, "?", None, 0, (), rviews, str(exc) or repr(exc)))
                continue
            views.append(GroupView(group, st.mode, st.master, st.epoch, st.in_sync, rviews))
    return views


def _rate(rates: tuple[float, float] | None) -> str:
    if rates is None:
        return "in - msg/s, out - msg/s"
    return f"in {rates[0]:.0f} msg/s, out {rates[1]:.0f} msg/s"


def headline(view: GroupView, rates: tuple[float, float] | None) -> str:
    if view.error is not None:
        return f"{view.group}: cannot ask who leads: {view.error}"
    word = "epoch" if view.mode == "Controller" else "term"
    return (f"{view.group} ({view.mode}): master {view.master or 'NONE'}, {word} {view.epoch}, "
            f"in sync {len(view.in_sync)}/{len(view.replicas)} "
            f"[{', '.join(view.in_sync) or 'none'}], {_rate(rates)}")


def render(views: Sequence[GroupView], rates: dict[str, tuple[float, float] | None],
           stamp: str) -> str:
    lines = [f"mqcluster local status --watch  {stamp}  (Ctrl-C to stop)", ""]
    for view in views:
        lines.append(headline(view, rates.get(view.group)))
        for r in view.replicas:
            if not r.alive:
                state = "DEAD"
            elif r.scrape is None:
                state = "no answer"
            else:
                role = {True: "MASTER", False: "slave", None: "?"}[r.scrape.is_master]
                offset = "" if r.scrape.max_offset is None else f"  offset {r.scrape.max_offset}"
                state = f"{role}{offset}"
            sync = "in sync" if r.name in view.in_sync else ""
            lines.append(f"  {r.name:<16} {state:<28} {sync}")
        lines.append("")
    if not views:
        lines.append("no broker group")
    return "\n".join(lines)


async def watch(processes: Sequence[Running], interval: float, iterations: int | None,
                write: Callable[[str], None], clear: bool,
                clock: Callable[[], float] = time.monotonic) -> None:
    """Redraw the view every ``interval`` seconds (``iterations`` times, or until
    cancelled); ``clear`` redraws in place (a terminal), else views follow each other."""
    rates = Rates()
    n = 0
    while iterations is None or n < iterations:
        views = await look(processes)
        now = clock()
        text = render(views, {v.group: rates.update(v, now) for v in views},
                      time.strftime("%H:%M:%S"))
        write((CLEAR if clear else "") + text + "\n")
        n += 1
        if iterations is None or n < iterations:
            await asyncio.sleep(interval)
