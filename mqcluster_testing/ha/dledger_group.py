"""An in-process DLedger-mode group of brokers on 127.0.0.x (no name server needed)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from mqcluster.broker.config import BrokerConfig, check_broker_config
from mqcluster.broker.server import BrokerServer
from mqcluster.store.batch import BatchPutResult, RawBatch
from mqcluster.store.message import MessageRecord, PutResult
from mqcluster_testing.ha.group import TOPIC, wait_until
from mqcluster_testing.procs import free_addr


class DLedgerGroup:
    def __init__(self, tmp: Path, size: int = 3, **extra: object) -> None:
        self.ids = [f"n{i}" for i in range(size)]
        self.ips = [f"127.0.0.{60 + i}" for i in range(size)]
        peers = ";".join(f"{n}-{free_addr(ip)}" for n, ip in zip(self.ids, self.ips,
                                                                  strict=True))
        self.configs = []
        for n, ip in zip(self.ids, self.ips, strict=True):
            def port(ip: str = ip) -> int:
                return int(free_addr(ip).rsplit(":", 1)[1])
            props: dict[str, object] = {
                "brokerClusterName": "DLedgerCluster", "brokerName": "dledger-a",
                "brokerIP1": ip, "bindAddress": ip, "listenPort": port(),
                "haListenPort": port(), "enableProxy": False, "metricsExporterType": "DISABLE",
                "storePathRootDir": str(tmp / n), "mappedFileSizeCommitLog": 1024 * 1024,
                "maxMessageSize": 64 * 1024, "enableDLegerCommitLog": True,
                "dLegerGroup": "dledger-a", "dLegerPeers": peers, "dLegerSelfId": n,
            }
            props.update(extra)
            self.configs.append(check_broker_config(BrokerConfig.model_validate(props)))
        self.brokers: list[BrokerServer | None] = [None] * size

    async def start(self) -> None:
        for i in range(len(self.ids)):
            await self.start_broker(i)

    async def start_broker(self, i: int) -> BrokerServer:
        b = BrokerServer(self.configs[i])
        await b.start()
        self.brokers[i] = b
        return b

    def broker(self, i: int) -> BrokerServer:
        b = self.brokers[i]
        assert b is not None, f"broker {i} is down"
        return b

    async def kill(self, i: int) -> None:
        b, self.brokers[i] = self.brokers[i], None
        if b is not None:
            await b.stop()

    def leader(self) -> int | None:
        for i, b in enumerate(self.brokers):
            if b is not None and b.dledger is not None and b.dledger.runner.is_leader \
                    and b.context.role.is_master:
                return i
        return None

    async def wait_leader(self, not_index: int | None = None) -> int:
        await wait_until(lambda: self.leader() not in (None, not_index))
        i = self.leader()
        assert i is not None
        return i

    async def put(self, i: int, body: bytes) -> PutResult:
        return (await self.broker(i).context.store.put_messages(
            [MessageRecord(TOPIC, 0, body)]))[0]

    def max_offset(self, i: int) -> int:
        return self.broker(i).context.store.commitlog_max_offset

    async def stop(self) -> None:
        for i in range(len(self.brokers)):
            with contextlib.suppress(Exception):
                await self.kill(i)

    async def put_batch(self, i: int, bodies: list[bytes], queue: int = 0) -> BatchPutResult:
        props = [b"UNIQ_KEY\x01" + b[:32] + b"\x02" for b in bodies]
        return await self.broker(i).context.store.put_batch(RawBatch(
            TOPIC, queue, "127.0.0.1:1", 1_700_000_000_000, list(bodies), props,
            [0] * len(bodies), [0] * len(bodies)))
