"""Fault injectors. Each injects one fault into a running cluster, waits for what the
fault should cause (a new master, a new active controller) or holds it for a while,
then heals it, and says what it did. The runner waits for the cluster to recover
between two faults."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from chaos.cluster import ChaosCluster
from chaos.controller_mode import ControllerCluster
from chaos.netns import Host

Inject = Callable[[ChaosCluster, random.Random], Awaitable[str]]


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Inject
    modes: tuple[str, ...] = ("controller", "dledger")


def hold_s(rng: random.Random) -> float:
    return rng.uniform(1.5, 4.0)


@contextlib.contextmanager
def partitioned(c: ChaosCluster, pairs: list[tuple[Host, Host]]) -> Iterator[None]:
    """Each pair of hosts cut from each other for the block, healed after it."""
    for a, b in pairs:
        c.net.partition(a, b)
    try:
        yield
    finally:
        for a, b in pairs:
            c.net.heal(a, b)


async def until_new_master(c: ChaosCluster, old: int, timeout: float) -> bool:
    """Wait for another replica to be master; False when none was within ``timeout``."""
    try:
        await c.wait_master(timeout, not_index=old)
    except TimeoutError:
        return False
    return True


async def kill_master(c: ChaosCluster, rng: random.Random) -> str:
    m = await c.wait_master()
    await c.brokers[m].kill()
    elected = await until_new_master(c, m, 30)
    await c.brokers[m].start()
    return f"SIGKILL b{m} (master), {'new master elected' if elected else 'NO new master'}"


async def hang_master(c: ChaosCluster, rng: random.Random) -> str:
    m = await c.wait_master()
    c.brokers[m].hang()
    try:
        elected = await until_new_master(c, m, 10)
    finally:
        c.brokers[m].wake()
    return f"SIGSTOP/SIGCONT b{m} (master), {'replaced' if elected else 'not replaced'}"


async def kill_controller(c: ChaosCluster, rng: random.Random) -> str:
    assert isinstance(c, ControllerCluster)
    active = await c.active_controller()
    i = active if active is not None else rng.randrange(len(c.controllers))
    await c.controllers[i].kill()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(15):
            while (await c.active_controller()) in (None, i):
                await asyncio.sleep(0.1)
    await c.controllers[i].start()
    return f"SIGKILL c{i}{' (active)' if i == active else ''}"


async def kill_namesrv(c: ChaosCluster, rng: random.Random) -> str:
    assert c.namesrv is not None
    await c.namesrv.kill()
    held = hold_s(rng)
    await asyncio.sleep(held)  # the fault is the name server's absence for this long
    await c.namesrv.start()
    return f"SIGKILL namesrv for {held:.1f} s"


async def partition_master_controllers(c: ChaosCluster, rng: random.Random) -> str:
    assert isinstance(c, ControllerCluster)
    m = await c.wait_master()
    with partitioned(c, [(c.brokers[m].host, ctl.host) for ctl in c.controllers]):
        elected = await until_new_master(c, m, 20)
    return f"partition b{m} (master) | controllers, {'new master' if elected else 'kept'}"


async def partition_master_slaves(c: ChaosCluster, rng: random.Random) -> str:
    m = await c.wait_master()
    # Long enough, sometimes, for the master to drop them from its SyncStateSet
    # (haMaxTimeSlaveNotCatchup is 4 s) and acknowledge alone.
    held = rng.uniform(2.0, 6.0)
    with partitioned(c, [(c.brokers[m].host, b.host)
                         for i, b in enumerate(c.brokers) if i != m]):
        if c.mode == "dledger":  # the followers elect one of themselves
            await until_new_master(c, m, 20)
        else:
            await asyncio.sleep(held)
    return f"partition b{m} (master) | other replicas"


async def partition_clients_master(c: ChaosCluster, rng: random.Random) -> str:
    m = await c.wait_master()
    assert c.client is not None
    held = hold_s(rng)
    with partitioned(c, [(c.client, c.brokers[m].host)]):
        await asyncio.sleep(held)  # clients must go on through the other replicas
    return f"partition clients | b{m} (master) for {held:.1f} s"


async def slow_disk(c: ChaosCluster, rng: random.Random) -> str:
    m = await c.wait_master()
    delay = rng.choice((200, 500, 1000, 2000))
    knob = c.seam_file(c.brokers[m], "fsync-delay-ms")
    knob.write_text(str(delay))
    held = hold_s(rng)
    try:
        await asyncio.sleep(held)
    finally:
        knob.write_text("0")
    return f"fsync +{delay} ms on b{m} (master) for {held:.1f} s"


async def clock_jump(c: ChaosCluster, rng: random.Random) -> str:
    procs = [*c.brokers, *c.controllers]
    p = rng.choice(procs)
    offset_s = rng.choice((-1, 1)) * rng.choice((30, 300, 3600))
    knob = c.seam_file(p, "clock-offset-ms")
    knob.write_text(str(offset_s * 1000))
    held = hold_s(rng)
    try:
        await asyncio.sleep(held)
    finally:
        knob.write_text("0")  # and back, as when NTP steps it
    return f"clock {offset_s:+d} s on {p.name} for {held:.1f} s"


FAULTS = (
    Fault("kill-master", kill_master),
    Fault("hang-master", hang_master),
    Fault("kill-controller", kill_controller, ("controller",)),
    Fault("kill-namesrv", kill_namesrv),
    Fault("part-master-controllers", partition_master_controllers, ("controller",)),
    Fault("part-master-slaves", partition_master_slaves),
    Fault("part-clients-master", partition_clients_master),
    Fault("slow-disk", slow_disk),
    Fault("clock-jump", clock_jump),
)


def faults_for(mode: str, names: list[str] | None = None) -> list[Fault]:
    chosen = [f for f in FAULTS if mode in f.modes]
    if names:
        unknown = set(names) - {f.name for f in FAULTS}
        if unknown:
            raise ValueError(f"unknown fault(s): {', '.join(sorted(unknown))}")
        chosen = [f for f in chosen if f.name in names]
    return chosen
