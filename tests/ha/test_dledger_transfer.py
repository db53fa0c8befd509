"""mqadmin dledgerTransferLeadership: the leader hands over to the named peer."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqcluster.admin.commands import AdminError
from mqcluster.admin.ops import dledger_transfer_leadership
from mqcluster_testing.ha.dledger_group import DLedgerGroup
from mqcluster_testing.ha.group import wait_until


async def test_the_leader_hands_leadership_to_the_named_peer(tmp_path: Path) -> None:
    g = DLedgerGroup(tmp_path)
    try:
        await g.start()
        leader = await g.wait_leader()
        assert (await g.put(leader, b"before")).ok
        target = (leader + 1) % 3
        peer = g.configs[target].dLegerSelfId
        assert peer is not None
        with pytest.raises(AdminError, match="not the DLedger leader"):
            await dledger_transfer_leadership(g.configs[target].broker_addr, peer)
        report = await dledger_transfer_leadership(g.configs[leader].broker_addr, peer)
        assert not report.errors and peer in report.text
        await wait_until(lambda: g.leader() == target, timeout=30)
        assert (await g.put(target, b"after")).ok
    finally:
        await g.stop()
