"""Connections that try to pin memory in a remoting server: each announces a frame of
``announced`` bytes and sends ``sent`` of them, then holds on. One event loop drives them
all. Used by the name server's and broker's multi-process limit tests."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from mqcluster.common.tasks import cancel_all

MIB = 1024 * 1024
CHUNK = bytes(64 * 1024)


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (Linux)."""
    return status_bytes(pid, "VmRSS")


def status_bytes(pid: int, field_name: str) -> int:
    """A size field of ``/proc/<pid>/status`` (given there in KiB), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field_name} for pid {pid}")


@dataclass
class Attack:
    host: str
    port: int
    connections: int = 1000
    announced: int = 16 * MIB
    sent: int = 15 * MIB
    wave: int = 100
    """Connections opened at once (the listen backlog is finite)."""
    give_up_after: float = 60.0
    """Seconds a connection may take to be closed or to write its bytes."""
    refused: int = 0
    """Closed by the server before all ``sent`` bytes were written."""
    pinning: int = 0
    """Wrote all ``sent`` bytes and were still open."""
    stalled: int = 0
    """Neither closed nor done within ``give_up_after``."""
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def one(self, done: asyncio.Queue[None]) -> None:
        writer = None
        left = self.sent
        reported = False
        try:
            async with asyncio.timeout(self.give_up_after):
                reader, writer = await asyncio.open_connection(self.host, self.port)
                sock = writer.get_extra_info("socket")
                # (small kernel buffers: the bytes sit in the server, not in the kernel)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
                writer.write(struct.pack(">I", self.announced))
                left = self.sent - 4
                while left > 0:
                    if reader.at_eof():
                        raise ConnectionResetError
                    writer.write(CHUNK[: min(left, len(CHUNK))])
                    left -= min(left, len(CHUNK))
                    await writer.drain()
            self.pinning += 1
            reported = True
            done.put_nowait(None)
            await reader.read()  # hold on until the server closes it (or the end)
        except (ConnectionError, OSError):
            if not left:  # (closed while holding on)
                return
            self.refused += 1
        except TimeoutError:
            self.stalled += 1
        finally:
            if not reported:
                done.put_nowait(None)
            if writer is not None:
                writer.close()

    async def start(self) -> None:
        """Open every connection (in waves) and wait until each has either written its
        bytes or been closed."""
        done: asyncio.Queue[None] = asyncio.Queue()
        for first in range(0, self.connections, self.wave):
            n = min(self.wave, self.connections - first)
            self._tasks += [asyncio.create_task(self.one(done)) for _ in range(n)]
            for _ in range(n):
                await done.get()

    async def stop(self) -> None:
        await cancel_all(self._tasks)


@dataclass
class Outcome:
    base: int
    """RSS before the attack, bytes."""
    peak: int
    """Highest RSS seen during it (sampled, and the kernel's high-water mark if it rose)."""
    probes: int
    """Requests of the normal client answered during the attack."""
    attack: Attack

    @property
    def growth(self) -> int:
        return self.peak - self.base

    def describe(self) -> str:
        return (f"RSS {self.base / MIB:.1f} -> peak {self.peak / MIB:.1f} MiB "
                f"(+{self.growth / MIB:.1f}); {self.attack.refused} attackers closed, "
                f"{self.attack.pinning} pinning, {self.attack.stalled} stalled; "
                f"{self.probes} normal requests served")


async def pin_while_serving(pid: int, host: str, port: int,
                            probe: Callable[[], Awaitable[None]],
                            connections: int = 1000) -> Outcome:
    """Attack ``host:port`` (served by process ``pid``) with ``connections`` pinning
    connections while ``probe`` (a normal client's request; it raises if not served)
    runs again and again; the RSS growth seen and the probes answered."""
    await probe()  # (warm: the first request's one-time allocations are not the attack's)
    base = rss_bytes(pid)
    hwm_before = status_bytes(pid, "VmHWM")
    peak = base
    probes = 0
    attack = Attack(host, port, connections=connections)
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_bytes(pid))
            await asyncio.sleep(0.02)

    async def serve_normally() -> None:
        nonlocal probes
        while not done.is_set():
            await probe()
            probes += 1
            await asyncio.sleep(0.05)

    async def attack_then_done() -> None:
        try:
            await attack.start()
            await asyncio.sleep(0.5)  # the pinning connections hold on meanwhile
        finally:
            done.set()

    try:
        await asyncio.gather(sample(), serve_normally(), attack_then_done())
        hwm_after = status_bytes(pid, "VmHWM")
        if hwm_after > hwm_before:
            peak = max(peak, hwm_after)
    finally:
        await attack.stop()
    return Outcome(base, peak, probes, attack)


def nested_header(code: int) -> bytes:
    """A remoting frame whose JSON header nests 200,000 levels deep."""
    header = b'{"code":%d,"x":' % code + b"[" * 200_000 + b"]" * 200_000 + b"}"
    return struct.pack(">II", 4 + len(header), len(header)) + header


def assert_flood_handled(out: str) -> None:
    """A server's output after a pinning flood and a deeply nested header: both were
    refused, nothing escaped a task, and the closes were logged once per kind and
    interval, not once per connection."""
    assert "nested too deeply" in out
    assert "partial frames of all connections would exceed" in out
    assert "Task exception was never retrieved" not in out and "Traceback" not in out
    assert out.count("closing connection") < 20, out.count("closing connection")
