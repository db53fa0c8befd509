"""DLedger mode: a group of 3 ``mqbroker`` whose commitlog is one Raft log."""

from __future__ import annotations

import asyncio
import collections

from chaos.cluster import TOPIC, ChaosCluster
from mqcluster.broker.dledger import PROPERTY_DLEDGER_INDEX
from mqcluster.client.dledger import read_status
from mqcluster.store.checkpoint import load_checkpoint
from mqcluster.store.message import StoredMessage
from mqcluster.store.offline import iter_messages

DLEDGER_PORT = 40911


class DLedgerCluster(ChaosCluster):
    mode = "dledger"
    group = "chaos-d"

    async def start_members(self) -> None:
        hosts = [self.net.add_host(f"b{i}") for i in range(3)]
        peers = ";".join(f"n{i}-{h.address}:{DLEDGER_PORT}" for i, h in enumerate(hosts))
        for i, h in enumerate(hosts):
            self.add_broker(i, h, enableDLegerCommitLog="true", dLegerGroup=self.group,
                            dLegerPeers=peers, dLegerSelfId=f"n{i}",
                            preferredLeaderIds="n0")
        await asyncio.gather(*(b.start() for b in self.brokers))

    async def status(self, i: int) -> dict[str, object] | None:
        if not self.brokers[i].alive or self.brokers[i].stopped:
            return None
        return await read_status(self.rpc, self.broker_addr(i))

    async def master(self) -> int | None:
        for i in range(len(self.brokers)):
            st = await self.status(i)
            if st is not None and st.get("role") == "LEADER":
                return i
        return None

    async def healthy(self) -> bool:
        sts = [await self.status(i) for i in range(len(self.brokers))]
        return (all(s is not None for s in sts)
                and any(s.get("role") == "LEADER" for s in sts if s)
                and len({s["appliedIndex"] for s in sts if s}) == 1)

    async def stop_brokers(self) -> int:
        m = await self.wait_master(30)
        for b in self.brokers:
            await b.terminate()
        return m

    def commitlogs(self) -> list[bytes]:
        """Every replica's commitlog up to the end of its last committed entry (its
        checkpoint's confirm offset): past it a replica may hold entries a leader wrote
        and never committed, which a later leader would have replaced."""
        out = []
        for i, c in enumerate(super().commitlogs()):
            cp = load_checkpoint(str(self.store_dir(i) / "checkpoint"))
            out.append(c if cp is None else c[:cp.confirm_phy_offset])
        return out

    def replicas_identical(self) -> tuple[bool, str]:
        """Every commitlog is the same log applied up to where that replica stopped: the
        shorter ones are prefixes of the longest. A replica stopped before it learnt of
        the last commits lacks only entries written after the workload ended (the
        leader's own writes, such as retries); a workload message in that tail is a
        replica that fell behind and is reported."""
        logs = self.commitlogs()
        shortest = min(len(c) for c in logs)
        longest = max(logs, key=len)
        for i, c in enumerate(logs):
            if c[:shortest] != longest[:shortest]:
                at = next(k for k in range(shortest) if c[k] != longest[k])
                return False, (f"b{i}'s commitlog differs from the longest at byte {at}: "
                               f"{self._records_at(at)}")
        ref = logs.index(longest)
        ref_records = [m for m in self.records(ref) if m.next_commitlog_offset <= len(longest)]
        workload = [m.commitlog_offset for m in ref_records if m.topic == TOPIC]
        for i, c in enumerate(logs):
            missing = sum(1 for offset in workload if offset >= len(c))
            if missing:
                return False, (f"b{i} ends at {len(c)} and lacks {missing} workload messages "
                               f"that b{ref} has")
        if all(len(c) == shortest for c in logs):
            return True, f"identical, {shortest} bytes (all applied to the commit index)"
        tail = collections.Counter(m.topic for m in ref_records
                                   if m.commitlog_offset >= shortest)
        return True, (f"identical up to {shortest} bytes; lengths {[len(c) for c in logs]}, "
                      f"b{ref}'s tail: {dict(tail)}")

    def _records_at(self, at: int) -> str:
        """Each replica's record holding byte ``at``."""
        found = []
        for j in range(len(self.brokers)):
            for m in iter_messages(str(self.store_dir(j) / "commitlog"), verify_crc=False):
                if m.commitlog_offset <= at < m.next_commitlog_offset:
                    found.append(f"b{j}: {m.topic} {self.position(m)}")
                    break
        return "; ".join(found) or "no record there"

    def position(self, m: StoredMessage) -> str:
        return m.properties.get(PROPERTY_DLEDGER_INDEX) or str(m.queue_offset)
