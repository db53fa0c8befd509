"""The master's view of its replicas: SyncStateSet, confirmOffset, and write acks.

Pure: time is passed in (milliseconds), nothing here touches sockets or the
controller. The master's HA service feeds it acks and connection changes and asks
it which SyncStateSet change to report; the change is applied here only once the
controller has accepted it (RIP-44), and until then acks need the union of the
old and the proposed set.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReplicaProgress:
    broker_id: int
    async_learner: bool = False
    ack_offset: int = 0
    connected: bool = True
    last_caught_up_ms: int = 0
    """When the replica last had everything the master had at a transfer."""
    _last_transfer_max: int = 0
    _last_transfer_ms: int = 0


@dataclass
class SyncStateView:
    master_id: int
    members: set[int]
    epoch: int
    master_max: int = 0
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)
    proposed: set[int] | None = None
    """A change reported to the controller and not yet answered."""

    # ---- inputs -------------------------------------------------------------

    def master_appended(self, max_offset: int) -> None:
        self.master_max = max_offset

    def connected(self, broker_id: int, async_learner: bool, now_ms: int) -> ReplicaProgress:
        rp = self.replicas.get(broker_id)
        if rp is None:  # a newcomer gets one full catch-up window
            rp = self.replicas[broker_id] = ReplicaProgress(broker_id, async_learner,
                                                            last_caught_up_ms=now_ms)
        rp.async_learner = async_learner
        rp.connected = True
        return rp

    def disconnected(self, broker_id: int) -> None:
        rp = self.replicas.get(broker_id)
        if rp is not None:
            rp.connected = False

    def transferred(self, broker_id: int, now_ms: int) -> None:
        """The master sent data (or a heartbeat) while at ``master_max``."""
        rp = self.replicas.get(broker_id)
        if rp is not None:
            rp._last_transfer_max = self.master_max
            rp._last_transfer_ms = now_ms

    def acked(self, broker_id: int, offset: int, now_ms: int) -> None:
        rp = self.replicas.get(broker_id)
        if rp is None:
            return
        rp.ack_offset = offset
        if offset >= self.master_max:
            rp.last_caught_up_ms = now_ms
        elif offset >= rp._last_transfer_max:
            rp.last_caught_up_ms = max(rp.last_caught_up_ms, rp._last_transfer_ms)

    # ---- derived ------------------------------------------------------------

    def offset_of(self, broker_id: int) -> int:
        if broker_id == self.master_id:
            return self.master_max
        rp = self.replicas.get(broker_id)
        return rp.ack_offset if rp is not None else 0

    @property
    def ack_members(self) -> set[int]:
        """Whose acks a write needs: the set, joined with a proposed one while pending."""
        return self.members | (self.proposed or set())

    @property
    def confirm_offset(self) -> int:
        """The smallest max offset among the SyncStateSet members (master included)."""
        return min(self.offset_of(b) for b in self.members | {self.master_id})

    def acked_by_all(self, end_offset: int) -> bool:
        # Asked for every waiting write after every ack: no sets built here.
        if self.master_max < end_offset:
            return False
        replicas = self.replicas
        for members in (self.members, self.proposed or ()):
            for b in members:
                if b != self.master_id:
                    rp = replicas.get(b)
                    if (rp.ack_offset if rp is not None else 0) < end_offset:
                        return False
        return True

    def acked_count(self, end_offset: int) -> int:
        """Replicas (master included) holding everything below ``end_offset``."""
        count = 1 if self.master_max >= end_offset else 0
        return count + sum(1 for b in self.ack_members - {self.master_id}
                           if self.offset_of(b) >= end_offset)

    # ---- SyncStateSet changes ---------------------------------------------------

    def wanted_members(self, now_ms: int, max_not_caught_up_ms: int) -> set[int]:
        """The set the master should report: laggards out, caught-up replicas in."""
        confirm = self.confirm_offset
        wanted = {self.master_id}
        for bid in self.members - {self.master_id}:
            rp = self.replicas.get(bid)
            if rp is None or not rp.connected or rp.async_learner:
                continue
            if now_ms - rp.last_caught_up_ms <= max_not_caught_up_ms:
                wanted.add(bid)
        for bid, rp in self.replicas.items():
            if bid in self.members or not rp.connected or rp.async_learner:
                continue
            if rp.ack_offset >= confirm:
                wanted.add(bid)
        return wanted

    def propose(self, wanted: set[int]) -> set[int] | None:
        """Start reporting ``wanted`` unless it is the current set or one is pending."""
        if self.proposed is not None or wanted == self.members:
            return None
        self.proposed = set(wanted)
        return self.proposed

    def accepted(self, members: set[int], epoch: int) -> None:
        self.members = set(members) | {self.master_id}
        self.epoch = epoch
        self.proposed = None

    def rejected(self) -> None:
        self.proposed = None
