"""Fault injectors. Each injects one fault into a running cluster, waits for what the
fault should cause (a new master, a new active controller) or holds it for a while,
then heals it, and says what it did and whether it took effect (a master kill after
which no new master was elected did not: the run reports it apart instead of counting
it). The runner waits for the cluster to recover between two faults.

``OVERLAPS`` are pairs of faults injected at once (``--overlap``): a master kill while
the master is cut from its replicas, a controller kill during the election a master
kill starts."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from chaos.cluster import ChaosCluster
from chaos.controller_mode import ControllerCluster
from chaos.netns import Host


class Outcome(str):
    """What a fault did, in words (a ``str``, as injectors' results always were), and
    whether it took effect: False when it did not cause what it is there for (no new
    master...). A plain ``str`` from an injector took effect (``outcome``)."""

    took_effect: bool

    def __new__(cls, what: str, took_effect: bool = True) -> Outcome:
        self = super().__new__(cls, what)
        self.took_effect = took_effect
        return self

    @property
    def what(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Outcome({self.what!r}, took_effect={self.took_effect})"


def outcome(said: str) -> Outcome:
    return said if isinstance(said, Outcome) else Outcome(said)


Inject = Callable[[ChaosCluster, random.Random], Awaitable[str]]


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Inject
    modes: tuple[str, ...] = ("controller", "dledger")
    power: bool = False
    """Cuts the power: needs the stores on lazyfs mounts."""


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


async def kill_master(c: ChaosCluster, rng: random.Random) -> Outcome:
    m = await c.wait_master()
    await c.brokers[m].kill()
    elected = await until_new_master(c, m, 30)
    await c.brokers[m].start()
    return Outcome(f"SIGKILL b{m} (master), "
                   f"{'new master elected' if elected else 'NO new master'}", elected)


async def hang_master(c: ChaosCluster, rng: random.Random) -> Outcome:
    m = await c.wait_master()
    c.brokers[m].hang()
    try:
        elected = await until_new_master(c, m, 10)
    finally:
        c.brokers[m].wake()
    return Outcome(f"SIGSTOP/SIGCONT b{m} (master), "
                   f"{'replaced' if elected else 'not replaced'}", elected)


async def kill_controller(c: ChaosCluster, rng: random.Random) -> Outcome:
    assert isinstance(c, ControllerCluster)
    active = await c.active_controller()
    i = active if active is not None else rng.randrange(len(c.controllers))
    await c.controllers[i].kill()
    taken_over = True
    try:
        async with asyncio.timeout(15):
            while (await c.active_controller()) in (None, i):
                await asyncio.sleep(0.1)
    except TimeoutError:
        taken_over = False
    await c.controllers[i].start()
    what = f"SIGKILL c{i}{' (active)' if i == active else ''}"
    return Outcome(what + ("" if taken_over else ", NO other controller took over"),
                   taken_over)


async def kill_namesrv(c: ChaosCluster, rng: random.Random) -> Outcome:
    assert c.namesrv is not None
    await c.namesrv.kill()
    held = hold_s(rng)
    await asyncio.sleep(held)  # the fault is the name server's absence for this long
    await c.namesrv.start()
    return Outcome(f"SIGKILL namesrv for {held:.1f} s")


async def partition_master_controllers(c: ChaosCluster, rng: random.Random) -> Outcome:
    assert isinstance(c, ControllerCluster)
    m = await c.wait_master()
    with partitioned(c, [(c.brokers[m].host, ctl.host) for ctl in c.controllers]):
        elected = await until_new_master(c, m, 20)
    return Outcome(f"partition b{m} (master) | controllers, "
                   f"{'new master' if elected else 'kept'}", elected)


async def partition_master_slaves(c: ChaosCluster, rng: random.Random) -> Outcome:
    m = await c.wait_master()
    # Long enough, sometimes, for the master to drop them from its SyncStateSet
    # (haMaxTimeSlaveNotCatchup is 4 s) and acknowledge alone.
    held = rng.uniform(2.0, 6.0)
    with partitioned(c, [(c.brokers[m].host, b.host)
                         for i, b in enumerate(c.brokers) if i != m]):
        if c.mode == "dledger":  # the followers elect one of themselves
            elected = await until_new_master(c, m, 20)
        else:  # the master goes on, acknowledging alone once they fall out
            elected = True
            await asyncio.sleep(held)
    return Outcome(f"partition b{m} (master) | other replicas"
                   + ("" if elected else ", NO new leader"), elected)


async def partition_clients_master(c: ChaosCluster, rng: random.Random) -> Outcome:
    m = await c.wait_master()
    assert c.client is not None
    held = hold_s(rng)
    with partitioned(c, [(c.client, c.brokers[m].host)]):
        await asyncio.sleep(held)  # clients must go on through the other replicas
    return Outcome(f"partition clients | b{m} (master) for {held:.1f} s")


async def slow_disk(c: ChaosCluster, rng: random.Random) -> Outcome:
    m = await c.wait_master()
    delay = rng.choice((200, 500, 1000, 2000))
    knob = c.seam_file(c.brokers[m], "fsync-delay-ms")
    knob.write_text(str(delay))
    held = hold_s(rng)
    try:
        await asyncio.sleep(held)
    finally:
        knob.write_text("0")
    return Outcome(f"fsync +{delay} ms on b{m} (master) for {held:.1f} s")


async def clock_jump(c: ChaosCluster, rng: random.Random) -> Outcome:
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
    return Outcome(f"clock {offset_s:+d} s on {p.name} for {held:.1f} s")


async def power_loss(c: ChaosCluster, rng: random.Random) -> Outcome:
    """The master and one or both other replicas lose power at once: SIGKILLed, every
    write they had not fsynced dropped, their stores unmounted and mounted again,
    restarted. A majority (DLedger's quorum) or all of them (every in-sync replica)."""
    n = len(c.brokers)
    return await _power_loss(c, rng, rng.choice((n // 2 + 1, n)))


async def power_loss_all(c: ChaosCluster, rng: random.Random) -> Outcome:
    """Every replica loses power at once."""
    return await _power_loss(c, rng, len(c.brokers))


async def _power_loss(c: ChaosCluster, rng: random.Random, count: int) -> Outcome:
    m = await c.wait_master()
    others = [i for i in range(len(c.brokers)) if i != m]
    hit = sorted([m, *rng.sample(others, count - 1)])
    await asyncio.gather(*(c.brokers[i].kill() for i in hit))
    c.power_losses.append(int(time.time() * 1000))
    lost = await asyncio.gather(*(c.power_cycle(i) for i in hit))
    await asyncio.gather(*(c.brokers[i].start() for i in hit))
    dropped = sum(int(d.get("unsynced_bytes", 0)) for d in lost)
    undone = sum(len(d.get("undone") or []) for d in lost)
    return Outcome(f"power loss on {', '.join(f'b{i}' for i in hit)} (master b{m}): "
                   f"{dropped // 1024} KiB unsynced dropped, {undone} namespace changes "
                   f"undone")


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
    Fault("power-loss", power_loss, power=True),
)


def overlap(first: Inject, second: Inject, after_s: float) -> Inject:
    """``second`` injected ``after_s`` into ``first`` (while it holds), both to the end;
    it took effect when both did."""
    async def inject(c: ChaosCluster, rng: random.Random) -> Outcome:
        async def later() -> str:
            await asyncio.sleep(after_s)
            return await second(c, rng)

        a, b = map(outcome, await asyncio.gather(first(c, rng), later()))
        return Outcome(f"{a}; during it: {b}", a.took_effect and b.took_effect)

    return inject


OVERLAPS = (
    # The master cut from its replicas, then killed: the new master must come from a
    # replica that has every acknowledged message, and the old one rejoin behind it.
    Fault("kill-master-during-part-master-slaves",
          overlap(partition_master_slaves, kill_master, 1.0)),
    # The active controller killed while it elects the dead master's successor.
    Fault("kill-controller-during-election", overlap(kill_master, kill_controller, 0.3),
          ("controller",)),
    # Power lost while the master is cut from its replicas: whatever it acknowledged
    # alone (once they fell out of its SyncStateSet) must be on its disk.
    Fault("power-loss-during-part-master-slaves",
          overlap(partition_master_slaves, power_loss, 1.5), power=True),
)


BY_NAME_ONLY = (
    # Every replica at once, each time (power-loss picks a majority or all): for
    # measuring what ASYNC_FLUSH loses, `--scenarios controller-async --faults
    # power-loss-all`.
    Fault("power-loss-all", power_loss_all, power=True),
)

POWER_FAULTS = frozenset(f.name for f in (*FAULTS, *OVERLAPS, *BY_NAME_ONLY) if f.power)
"""The faults that need the stores on lazyfs mounts."""


def faults_for(mode: str, names: list[str] | None = None, overlaps: bool = False
               ) -> list[Fault]:
    """The mode's fault kinds; with ``overlaps``, the overlapping pairs too; ``names``
    picks among all of them (an overlapping pair, or one of ``BY_NAME_ONLY``, named is
    chosen as well)."""
    known = (*FAULTS, *OVERLAPS, *BY_NAME_ONLY)
    pool = known if names else (*FAULTS, *OVERLAPS) if overlaps else FAULTS
    chosen = [f for f in pool if mode in f.modes]
    if names:
        unknown = set(names) - {f.name for f in known}
        if unknown:
            raise ValueError(f"unknown fault(s): {', '.join(sorted(unknown))}")
        chosen = [f for f in chosen if f.name in names]
    return chosen
