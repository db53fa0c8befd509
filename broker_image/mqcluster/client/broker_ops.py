"""Operations requests to brokers (RocketMQ's codes, ``mqcluster.protocol.broker``): one
request to each of several brokers, each answer kept or a one-line error naming the
broker. mqadmin prints these; the operator's drivers act on them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mqcluster.client.errors import ClientError
from mqcluster.protocol.broker import RequestCode
from mqcluster.protocol.controller import EpochEntryCache, ProtocolError, code_name, request
from mqcluster.protocol.controller import RequestCode as ControllerCode
from mqcluster.protocol.dledger import DLedgerRequestCode
from mqcluster.wire.frame import FrameError, RemotingCommand, ResponseCode
from mqcluster.wire.rpc import RpcClient, RpcError

TIMEOUT = 3.0
CONNECT_TIMEOUT = 1.0


class OpsError(ClientError):
    """No broker asked answered (each one's refusal or silence is in the message)."""


@dataclass
class Answers:
    """What each broker that answered said (``data``, by address), and a line for each
    that refused or did not answer (``errors``)."""

    data: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


async def call(rpc: RpcClient, addr: str, code: int, ext: dict[str, str] | None = None,
               body: bytes = b"", timeout: float = TIMEOUT) -> RemotingCommand:
    """One request; OpsError naming ``addr`` unless the broker answers SUCCESS."""
    cmd = RemotingCommand.request(code, ext or {})
    cmd.body = body
    try:
        resp = await rpc.invoke(addr, cmd, timeout)
    except RpcError as exc:
        raise OpsError(f"{addr}: {exc}") from exc
    if resp.code != ResponseCode.SUCCESS:
        raise OpsError(f"{addr}: code {resp.code}: {resp.remark or 'no remark'}")
    return resp


async def per_broker(targets: Sequence[str], code: int, ext: dict[str, str] | None = None,
                     body: bytes = b"", *, timeout: float = TIMEOUT,
                     connect_timeout: float = CONNECT_TIMEOUT,
                     ) -> tuple[list[tuple[str, RemotingCommand]], list[str]]:
    """The same request to each target in turn: the answers, and one error line per
    target that failed; OpsError when every target failed."""
    rpc = RpcClient(connect_timeout=connect_timeout)
    ok: list[tuple[str, RemotingCommand]] = []
    errors: list[str] = []
    try:
        for addr in targets:
            try:
                ok.append((addr, await call(rpc, addr, code, ext, body, timeout)))
            except OpsError as exc:
                errors.append(str(exc))
    finally:
        await rpc.close()
    if not ok and errors:
        raise OpsError("; ".join(errors))
    return ok, errors


def body_json(resp: RemotingCommand) -> Any:
    return json.loads(resp.body or b"{}")


async def update_broker_config(targets: Sequence[str], key: str, value: str) -> Answers:
    """UPDATE_BROKER_CONFIG ``key=value`` on each broker; ``data`` holds the ones that
    applied it."""
    ok, errors = await per_broker(targets, RequestCode.UPDATE_BROKER_CONFIG,
                                  body=f"{key}={value}\n".encode())
    return Answers({addr: True for addr, _ in ok}, errors)


async def runtime_info(targets: Sequence[str]) -> Answers:
    """GET_BROKER_RUNTIME_INFO: each broker's status table (``commitLogMaxOffset``, ...)."""
    ok, errors = await per_broker(targets, RequestCode.GET_BROKER_RUNTIME_INFO)
    return Answers({addr: body_json(resp).get("table", {}) for addr, resp in ok}, errors)


async def dledger_transfer_leadership(broker_addr: str, peer_id: str) -> Answers:
    """Ask the DLedger leader at ``broker_addr`` to hand leadership to ``peer_id``;
    ``data`` holds its remark."""
    ok, errors = await per_broker([broker_addr], DLedgerRequestCode.DLEDGER_TRANSFER_LEADERSHIP,
                                  {"peerId": peer_id})
    return Answers({addr: resp.remark or "" for addr, resp in ok}, errors)


async def broker_lag(broker_addr: str) -> int:
    """Messages the broker's subscription groups have still to consume: GET_CONSUME_STATS
    diffs summed over every group it knows and every queue of each topic the group has
    committed an offset on (a group that never consumed a topic is not waited for)."""
    ok, _ = await per_broker([broker_addr], RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    groups = sorted(body_json(ok[0][1]).get("subscriptionGroupTable") or {})
    total = 0
    for group in groups:
        stats, _ = await per_broker([broker_addr], RequestCode.GET_CONSUME_STATS,
                                    {"consumerGroup": group})
        # Every queue of a topic the group consumes counts, also those it never committed on.
        for topic in sorted({r["topic"] for r in body_json(stats[0][1]).get("offsetTable", [])}):
            per_topic, _ = await per_broker([broker_addr], RequestCode.GET_CONSUME_STATS,
                                            {"consumerGroup": group, "topic": topic})
            total += sum(int(r["diff"]) for r in body_json(per_topic[0][1]).get("offsetTable", []))
    return total


async def metadata_tables(broker_addr: str) -> dict[str, dict[str, Any]]:
    """The broker's topic and subscription-group tables (what a slave copies from its
    master), keyed ``topics`` and ``groups``."""
    topics, _ = await per_broker([broker_addr], RequestCode.GET_ALL_TOPIC_CONFIG)
    groups, _ = await per_broker([broker_addr], RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    return {"topics": dict(body_json(topics[0][1]).get("topicConfigTable") or {}),
            "groups": dict(body_json(groups[0][1]).get("subscriptionGroupTable") or {})}


async def epoch_caches(addrs: Sequence[str], *, timeout: float = TIMEOUT,
                       connect_timeout: float = CONNECT_TIMEOUT,
                       ) -> tuple[list[tuple[str, EpochEntryCache]], list[str]]:
    """GET_BROKER_EPOCH_CACHE (RIP-44) of each broker: its epoch entries and max offset;
    a line per broker that refused, did not answer or answered a bad body."""
    rpc = RpcClient(connect_timeout=connect_timeout)
    caches: list[tuple[str, EpochEntryCache]] = []
    errors: list[str] = []
    try:
        for addr in addrs:
            try:
                resp = await rpc.invoke(addr, request(ControllerCode.GET_BROKER_EPOCH_CACHE),
                                        timeout)
                if resp.code != ResponseCode.SUCCESS:
                    errors.append(f"{addr}: {code_name(resp.code)}: {resp.remark or 'no remark'}")
                    continue
                caches.append((addr, EpochEntryCache.decode(resp.body)))
            except (RpcError, ProtocolError, FrameError) as exc:
                errors.append(f"{addr}: {exc}")
    finally:
        await rpc.close()
    return caches, errors
