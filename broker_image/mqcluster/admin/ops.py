"""mqadmin's operations subcommands: subscription groups, topic deletion, broker status
and config, consumer progress, write permission, messages by id, client connections,
and cleaning a group's metadata on the controller. Names and flags are RocketMQ's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from mqcluster.admin.commands import (
    CONNECT_TIMEOUT,
    TIMEOUT,
    AdminError,
    Report,
    _addrs,
    _check_reachable,
    _close_controller,
    _cluster_info,
    _controller,
    broker_names_of,
    broker_targets,
)
from mqcluster.client import broker_ops
from mqcluster.client.broker_ops import OpsError
from mqcluster.client.controller import ControllerError
from mqcluster.protocol.broker import RequestCode as BrokerCode
from mqcluster.protocol.controller import ProtocolError
from mqcluster.protocol.dledger import DLedgerRequestCode
from mqcluster.protocol.namesrv import RequestCode as NamesrvCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import RpcError

Row = dict[str, Any]


def table(rows: Sequence[Row], columns: Sequence[tuple[str, str]]) -> str:
    """Left-aligned columns, RocketMQ's ``#Header`` style."""
    head = [f"#{title}" for title, _ in columns]
    body = [["" if r.get(key) is None else str(r.get(key)) for _, key in columns] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in body)) if body else len(h)
              for i, h in enumerate(head)]
    lines = [head, *body]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


_body = broker_ops.body_json

T = TypeVar("T")


async def _asked(request: Awaitable[T]) -> T:
    """A client request; a failure of every broker is mqadmin's one-line error."""
    try:
        return await request
    except OpsError as exc:
        raise AdminError(str(exc)) from exc


async def _per_broker(targets: Sequence[str], code: int, ext: dict[str, str] | None = None,
                      body: bytes = b"") -> tuple[list[tuple[str, RemotingCommand]], list[str]]:
    return await _asked(broker_ops.per_broker(targets, code, ext, body, timeout=TIMEOUT,
                                              connect_timeout=CONNECT_TIMEOUT))


async def update_sub_group(targets: list[str], group: dict[str, Any]) -> Report:
    body = json.dumps(group).encode()
    ok, errors = await _per_broker(targets, BrokerCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                   body=body)
    rows = [{"broker": addr, "group": group["groupName"],
             "consumeOrderly": group["consumeMessageOrderly"]} for addr, _ in ok]
    text = "\n".join(f"create subscription group to {r['broker']} success." for r in rows)
    return Report(text + "\n" + table(rows, [("Broker", "broker"), ("Group", "group"),
                                             ("ConsumeOrderly", "consumeOrderly")]),
                  {"results": rows, "subscriptionGroup": group}, errors)


async def delete_topic(namesrv: str, cluster: str, topic: str) -> Report:
    targets = await broker_targets(None, cluster, namesrv)
    ok, errors = await _per_broker(targets, BrokerCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
    ns_ok, ns_errors = await _per_broker(_addrs(namesrv, "name server"),
                                         NamesrvCode.DELETE_TOPIC_IN_NAMESRV,
                                         {"topic": topic, "clusterName": cluster})
    lines = [f"delete topic [{topic}] from cluster [{cluster}] success."] if ok else []
    if ns_ok:
        lines.append(f"delete topic [{topic}] from NameServer success.")
    return Report("\n".join(lines), {"topic": topic, "cluster": cluster,
                                     "brokers": [a for a, _ in ok],
                                     "nameServers": [a for a, _ in ns_ok]}, errors + ns_errors)


async def broker_status(targets: list[str]) -> Report:
    answers = await _asked(broker_ops.runtime_info(targets))
    data, errors = answers.data, answers.errors
    text = "\n\n".join(
        (f"# {addr}\n" if len(data) > 1 else "")
        + "\n".join(f"{k:<32} : {v}" for k, v in sorted(t.items()))
        for addr, t in data.items())
    return Report(text, data, errors)


def _properties(resp: RemotingCommand) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (resp.body or b"").decode("utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


async def get_broker_config(targets: list[str]) -> Report:
    ok, errors = await _per_broker(targets, BrokerCode.GET_BROKER_CONFIG)
    data = {addr: _properties(resp) for addr, resp in ok}
    text = "\n\n".join(
        f"============{addr}============\n"
        + "\n".join(f"{k:<40} =  {v}" for k, v in props.items())
        for addr, props in data.items())
    return Report(text, data, errors)


async def update_broker_config(targets: list[str], key: str, value: str) -> Report:
    answers = await _asked(broker_ops.update_broker_config(targets, key, value))
    text = "\n".join(f"update broker config success, {addr}" for addr in answers.data)
    return Report(text, {"updated": list(answers.data), "key": key, "value": value},
                  answers.errors)


async def consumer_progress(namesrv: str, group: str, topic: str | None) -> Report:
    info = await _cluster_info(namesrv)
    targets = sorted({a for cluster in info.clusterAddrTable for a in info.master_addrs(cluster)})
    ext = {"consumerGroup": group, **({"topic": topic} if topic else {})}
    ok, errors = await _per_broker(targets, BrokerCode.GET_CONSUME_STATS, ext)
    rows = [row for _, resp in ok for row in _body(resp).get("offsetTable", [])]
    rows.sort(key=lambda r: (r["topic"], r["brokerName"], r["queueId"]))
    diff = sum(r["diff"] for r in rows)
    text = table(rows, [("Topic", "topic"), ("Broker Name", "brokerName"), ("QID", "queueId"),
                        ("Broker Offset", "brokerOffset"),
                        ("Consumer Offset", "consumerOffset"), ("Diff", "diff")])
    return Report(f"{text}\n\nDiff Total: {diff}",
                  {"group": group, "offsetTable": rows, "diffTotal": diff}, errors)


async def write_perm(namesrv: str, broker_name: str, add: bool) -> Report:
    code = NamesrvCode.ADD_WRITE_PERM_OF_BROKER if add else NamesrvCode.WIPE_WRITE_PERM_OF_BROKER
    ok, errors = await _per_broker(_addrs(namesrv, "name server"), code,
                                   {"brokerName": broker_name})
    field = "addTopicCount" if add else "wipeTopicCount"
    verb = "add" if add else "wipe"
    rows = [{"namesrv": addr, "count": int((resp.ext_fields or {}).get(field, 0))}
            for addr, resp in ok]
    text = "\n".join(f"{verb} write perm of broker[{broker_name}] in name server[{r['namesrv']}]"
                     f" OK, {r['count']}" for r in rows)
    return Report(text, {"brokerName": broker_name, field: rows}, errors)


def parse_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """RocketMQ's offset message id: 8 hex digits of IPv4, 8 of port, 16 of offset."""
    if len(msg_id) != 32:
        raise AdminError(f"{msg_id!r} is not an offset message id (32 hex digits)")
    try:
        ip = int(msg_id[:8], 16)
        port = int(msg_id[8:16], 16)
        offset = int(msg_id[16:], 16)
    except ValueError:
        raise AdminError(f"{msg_id!r} is not an offset message id (32 hex digits)") from None
    host = ".".join(str((ip >> s) & 0xFF) for s in (24, 16, 8, 0))
    return f"{host}:{port}", offset


async def query_msg_by_id(msg_id: str) -> Report:
    addr, offset = parse_offset_msg_id(msg_id)
    ok, _ = await _per_broker([addr], BrokerCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    msg = _body(ok[0][1])
    keys = ("topic", "tags", "keys", "queueId", "queueOffset", "commitLogOffset", "msgId",
            "offsetMsgId", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost",
            "storeSize", "properties", "body")
    text = "\n".join(f"{k:<20}: {msg.get(k)}" for k in keys)
    return Report(text, msg)


async def connections(namesrv: str, group: str, topic: str | None, producer: bool) -> Report:
    info = await _cluster_info(namesrv)
    targets = sorted({a for c in info.clusterAddrTable for a in info.master_addrs(c)})
    if producer:
        code = BrokerCode.GET_PRODUCER_CONNECTION_LIST
        ext = {"producerGroup": group, **({"topic": topic} if topic else {})}
    else:
        code = BrokerCode.GET_CONSUMER_CONNECTION_LIST
        ext = {"consumerGroup": group}
    ok, errors = await _per_broker(targets, code, ext)
    rows = [{**c, "broker": addr} for addr, resp in ok
            for c in _body(resp).get("connectionSet", [])]
    text = table(rows, [("ClientId", "clientId"), ("Kind", "kind"), ("Group", "group"),
                        ("Topics", "topics"), ("Connected", "connected"), ("Broker", "broker")])
    return Report(text, {"connectionSet": rows}, errors)


async def dledger_status(broker_addr: str | None, cluster: str | None,
                         namesrv: str | None) -> Report:
    """Every replica of DLedger groups: Raft term, role, commit index and ledger end."""
    if broker_addr:
        targets = _addrs(broker_addr, "broker")
    elif cluster and namesrv:
        info = await _cluster_info(namesrv)
        targets = sorted(a for name in broker_names_of(info, cluster)
                         for a in info.brokerAddrTable[name].brokerAddrs.values())
    else:
        raise AdminError("give -b <brokerAddr>, or -c <clusterName> with a name server")
    ok, errors = await _per_broker(targets, DLedgerRequestCode.DLEDGER_STATUS)
    rows = [{"broker": addr, **_body(resp)} for addr, resp in ok]
    text = table(rows, [("Broker", "broker"), ("Peer", "id"), ("Role", "role"),
                        ("Term", "term"), ("Leader", "leader"), ("CommitIndex", "commitIndex"),
                        ("LedgerEnd", "lastIndex"), ("Applied", "appliedIndex"),
                        ("Batches", "proposedBuilt"), ("SingleEntries", "proposedOther")])
    return Report(text, {"replicas": rows}, errors)


async def dledger_transfer_leadership(broker_addr: str, peer_id: str) -> Report:
    """Ask the DLedger leader at ``broker_addr`` to hand leadership to ``peer_id``."""
    answers = await _asked(broker_ops.dledger_transfer_leadership(broker_addr, peer_id))
    return Report("\n".join(answers.data.values()),
                  {"broker": broker_addr, "peerId": peer_id}, answers.errors)


async def clean_broker_metadata(controller: str, cluster: str | None, broker_name: str,
                                broker_ids: str | None, clean_living: bool) -> Report:
    ids = None
    if broker_ids:
        try:
            ids = [int(x) for x in broker_ids.split(";") if x.strip()]
        except ValueError:
            raise AdminError(f"-b {broker_ids!r}: broker ids are integers separated by ';'")\
                from None
    client = _controller(controller)
    try:
        await _check_reachable(client)
        await client.clean_broker_data(cluster, broker_name, ids,
                                       clean_living_broker=clean_living)
    except (RpcError, ControllerError, ProtocolError) as exc:
        raise AdminError(f"clean broker metadata of {broker_name}: {exc}") from exc
    finally:
        await _close_controller(client)
    what = "all replicas" if ids is None else f"replicas {ids}"
    return Report(f"clear broker {broker_name} metadata ({what}) from controller success.",
                  {"brokerName": broker_name, "brokerIds": ids})
