"""A controller-mode group with ACL 2.0 on: the brokers' own requests to each other
(a slave copying the master's topics, groups and offsets) sign with the inner
credentials and pass; an anonymous request to the same master is refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mqcluster.protocol.broker import BrokerResponseCode, RequestCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcClient
from mqcluster_testing.ha.group import GroupHarness

INNER = json.dumps({"username": "inner", "password": "inner-secret"})


@pytest.fixture
async def group(tmp_path: Path) -> AsyncIterator[GroupHarness]:
    g = GroupHarness(tmp_path, 2, authenticationEnabled=True, authorizationEnabled=True,
                     innerClientAuthenticationCredentials=INNER)
    try:
        await g.start()
        yield g
    finally:
        await g.stop()


async def test_slaves_copy_the_masters_metadata_with_the_inner_credentials(
        group: GroupHarness) -> None:
    g = group
    m = await g.copy_master_metadata()
    rpc = RpcClient()
    try:
        resp = await rpc.invoke(g.broker(m).context.config.broker_addr,
                                RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5.0)
    finally:
        await rpc.close()
    assert resp.code == BrokerResponseCode.NO_PERMISSION
