"""The broker processes of a test group: fault injection and offline reads of their stores."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from mqcluster.store.message import StoredMessage
from mqcluster.store.offline import iter_messages
from mqcluster_testing.broker.procs import BrokerProc


class BrokerProcesses:
    """``brokers`` are started by the subclass; SIGKILL (``kill``), SIGSTOP/SIGCONT
    (``hang``/``wake``), restart on the same store, and the stores read back."""

    brokers: list[BrokerProc]

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    @property
    def endpoints(self) -> str:
        """Every replica's gRPC endpoint, as a client configured for the group lists them."""
        return ";".join(f"{b.ip}:{b.props['grpcServerPort']}" for b in self.brokers)

    def alive(self, i: int) -> bool:
        p = self.brokers[i].proc
        return p is not None and p.returncode is None

    async def kill(self, i: int) -> None:
        await self.brokers[i].kill()

    def _signal(self, i: int, sig: signal.Signals) -> None:
        p = self.brokers[i].proc
        assert p is not None
        os.kill(p.pid, sig)

    def hang(self, i: int) -> None:
        self._signal(i, signal.SIGSTOP)

    def wake(self, i: int) -> None:
        self._signal(i, signal.SIGCONT)

    async def restart(self, i: int) -> None:
        await self.brokers[i].restart()

    def store_dir(self, i: int) -> Path:
        return Path(self.brokers[i].props["storePathRootDir"])

    def messages(self, i: int) -> list[StoredMessage]:
        return list(iter_messages(str(self.store_dir(i) / "commitlog")))

    def commitlog(self, i: int) -> bytes:
        directory = self.store_dir(i) / "commitlog"
        return b"".join((directory / n).read_bytes() for n in sorted(os.listdir(directory)))

    async def kill_brokers(self) -> None:
        for b in self.brokers:
            with contextlib.suppress(Exception):
                if b.proc is not None and b.proc.returncode is None:
                    os.kill(b.proc.pid, signal.SIGCONT)
                await b.kill()

    def logs(self) -> str:
        return "\n".join(f"--- broker {i}\n{b.log_tail(60)}" for i, b in enumerate(self.brokers))


G = TypeVar("G", bound=BrokerProcesses)


@contextlib.asynccontextmanager
async def running(group: G, ready: Callable[[], Awaitable[object]]) -> AsyncIterator[G]:
    """``group`` started and ``ready`` for a test; its brokers' log tails printed if the
    test fails; closed whatever happens."""
    try:
        await group.start()
        await ready()
        yield group
    except BaseException:
        print(group.logs())
        raise
    finally:
        await group.close()
