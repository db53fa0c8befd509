"""``make demo``: the examples/ manifests as a local cluster, a failover in each group.

A name server trio with the controller embedded, a controller-mode group of 3, a
DLedger group of 3 and the Controller's proxy tier (``spec.proxy``, two ``mqproxy``),
every process on its own 127.x.y.z address with the config the operator would render
for its pod. In each group the official RocketMQ 5 client sends through the proxies
(one endpoint for every group, as a client on Kubernetes is given the proxy Service)
while the master (leader) is SIGKILLed; the demo
prints who was elected and how soon, the longest pause between acknowledged sends,
and checks that a consumer receives every acknowledged message; meanwhile lines of
the live view (`mqcluster local status --watch`) show the master, the epoch, the
in-sync replicas and the rates change. Everything is stopped and removed at the end,
also after an error or Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mqcluster.client import AdminClient

from .cli import load, random_prefix
from .inspect import GroupState, group_state
from .plan import Manifests, plan, read_manifests
from .runner import LocalCluster, Running
from .watch import Rates, headline, look

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MANIFESTS = ("controller-embedded.yaml", "brokergroup-controller.yaml",
             "brokergroup-dledger.yaml")
BEFORE, AFTER = 30, 30
"""Acknowledged sends before the kill, and after it."""

Say = Callable[[str], None]


@dataclass
class Sends:
    """What the producer thread was told."""

    acked: dict[str, float] = field(default_factory=dict)
    failed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def longest_gap(self) -> float:
        times = sorted(self.acked.values())
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def resumed_after(self, t: float) -> float | None:
        """Seconds from ``t`` to the first acknowledgement after it."""
        later = [a for a in self.acked.values() if a > t]
        return min(later) - t if later else None


def _thread_loop() -> None:
    asyncio.set_event_loop(asyncio.new_event_loop())  # the client's grpc.aio needs one


def produce(endpoints: str, topic: str, sends: Sends) -> None:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    _thread_loop()
    producer = Producer(ClientConfiguration(endpoints, Credentials(), request_timeout=3),
                        (topic,))
    try:
        producer.startup()
        for n in itertools.count():
            if sends.stop.is_set():
                break
            msg = Message()
            msg.topic, msg.body, msg.keys = topic, f"m{n}".encode(), f"m{n}"
            try:
                producer.send(msg)
                sends.acked[f"m{n}"] = time.monotonic()
            except Exception:
                sends.failed += 1
    except BaseException as exc:
        sends.error = exc
    finally:
        producer.shutdown()


def consume(endpoints: str, topic: str, want: set[str], timeout: float) -> set[str]:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    _thread_loop()
    consumer = SimpleConsumer(ClientConfiguration(endpoints, Credentials()), "DemoGroup",
                              {topic: FilterExpression("*")}, await_duration=1)
    got: set[str] = set()
    consumer.startup()
    try:
        deadline = time.monotonic() + timeout
        while not want <= got and time.monotonic() < deadline:
            try:
                for m in consumer.receive(32, 10):
                    got.add(m.body.decode())
                    consumer.ack(m)
            except Exception:
                time.sleep(0.2)
    finally:
        consumer.shutdown()
    return got


async def wait_state(replicas: list[Running], ready: Callable[[GroupState], bool], what: str,
                     say: Say, timeout: float = 60.0) -> GroupState:
    say(f"  waiting for {what}")
    deadline = time.monotonic() + timeout
    last: GroupState | None = None
    while time.monotonic() < deadline:
        try:
            last = await group_state(replicas)
            if ready(last):
                return last
        except Exception:  # the controllers or the replicas are still starting
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last seen: {last})")


async def until(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the producer stopped getting acknowledgements")
        await asyncio.sleep(0.05)


async def live_view(replicas: list[Running], say: Say, stop: asyncio.Event,
                    every: float = 2.0) -> None:
    """What ``mqcluster local status --watch`` shows of the group, as lines: at once when
    the master, the epoch or the in-sync replicas change, else every ``every`` seconds."""
    rates = Rates()
    last: object = None
    said = 0.0
    while not stop.is_set():
        views = await look(replicas)
        now = time.monotonic()
        if views:
            view, rate = views[0], rates.update(views[0], now)
            if view.headline() != last or now - said >= every:
                say("  live: " + headline(view, rate))
                last, said = view.headline(), now
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)


async def failover(cluster: LocalCluster, group: str, say: Say) -> bool:
    stop = asyncio.Event()
    replicas = [p for p in cluster.processes if p.group == group]
    viewer = asyncio.create_task(live_view(replicas, say, stop))
    try:
        return await _failover(cluster, group, say)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await viewer


def with_proxy(manifests: Manifests) -> Manifests:
    """The examples' Controller with its proxy tier enabled."""
    return Manifests([(o, s.model_copy(update={"proxy": s.proxy.model_copy(
        update={"enabled": True})})) for o, s in manifests.controllers], manifests.groups)


async def _failover(cluster: LocalCluster, group: str, say: Say) -> bool:
    replicas = [p for p in cluster.processes if p.group == group]
    proxies = [p for p in cluster.processes if p.kind == "proxy"]
    first = await wait_state(replicas, lambda s: s.master is not None and len(s.in_sync) == 3,
                             f"{group}: a master and all 3 replicas in sync", say)
    say(f"{group} ({first.mode} mode): master {first.master}, in sync {', '.join(first.in_sync)}")
    topic = f"Demo-{group}"
    for r in replicas:  # every replica knows the topic, whoever leads later
        async with AdminClient(broker_addr=r.addr) as admin:
            await admin.create_topic(topic, queue_nums=4)
    endpoints = ";".join(p.grpc for p in proxies) or ";".join(r.grpc for r in replicas)
    say(f"  the official client sends to {topic} through "
        + (f"the proxies {', '.join(p.name for p in proxies)}" if proxies
           else "the group's replicas"))
    sends = Sends()
    producer = threading.Thread(target=produce, args=(endpoints, topic, sends), daemon=True)
    producer.start()
    try:
        await until(lambda: len(sends.acked) >= BEFORE or sends.error is not None, 60)
        say(f"  the official client has {len(sends.acked)} acknowledged sends; "
            f"SIGKILL the master {first.master}")
        assert first.master is not None
        killed_at = time.monotonic()
        cluster.kill(first.master)
        second = await wait_state(
            replicas, lambda s: s.master not in (None, first.master),
            f"{group}: a new master", say, timeout=30)
        elected = time.monotonic() - killed_at
        say(f"  elected {second.master} in {elected:.2f} s "
            f"({'epoch' if second.mode == 'Controller' else 'term'} {first.epoch} -> "
            f"{second.epoch})")
        target = len(sends.acked) + AFTER
        await until(lambda: len(sends.acked) >= target or sends.error is not None, 60)
    finally:
        sends.stop.set()
        await asyncio.to_thread(producer.join, 30)
    if sends.error is not None:
        raise RuntimeError(f"the producer failed: {sends.error!r}")
    resumed = sends.resumed_after(killed_at)
    say(f"  {len(sends.acked)} acknowledged sends, {sends.failed} failed and sent again; "
        f"sends resumed {resumed or 0:.2f} s after the kill; longest pause between "
        f"acknowledgements {sends.longest_gap():.2f} s")
    survivors = ";".join(r.grpc for r in replicas if r.name != first.master)
    got = await asyncio.to_thread(consume, endpoints if proxies else survivors, topic,
                                  set(sends.acked), 60)
    lost = set(sends.acked) - got
    if lost:
        say(f"  LOST {len(lost)} acknowledged messages: {sorted(lost)[:10]}")
        return False
    say(f"  a consumer received all {len(sends.acked)} acknowledged messages: none lost")
    return True


async def run(say: Say) -> bool:
    with tempfile.TemporaryDirectory(prefix="mqcluster-demo-") as tmp:
        cluster = LocalCluster(Path(tmp) / "state")
        try:
            say("rendering the pods' configs from " + ", ".join(f"examples/{m}"
                                                                 for m in MANIFESTS))
            manifests = with_proxy(read_manifests(load([str(EXAMPLES / m) for m in MANIFESTS])))
            processes = plan(manifests, random_prefix(), Path(tmp) / "state" / "data")
            say(f"starting {len(processes)} processes, each on its own 127.x.y.z address")
            await asyncio.to_thread(cluster.up, processes, say)
            ok = True
            for group in dict.fromkeys(p.group for p in processes if p.kind == "broker"):
                ok = await failover(cluster, group, say) and ok
            return ok
        finally:
            say("stopping every process")
            killed = cluster.down()
            say("stopped" + (f" ({', '.join(killed)} had to be killed)" if killed else ""))


def main() -> None:
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)

    try:
        ok = asyncio.run(run(say))
    except KeyboardInterrupt:
        print("interrupted; every process was stopped", file=sys.stderr)
        sys.exit(130)
    say("demo done: no acknowledged message lost" if ok else "demo FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
