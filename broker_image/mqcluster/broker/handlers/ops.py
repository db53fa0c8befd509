"""Operations requests (RocketMQ's codes): broker config, consume progress, message by
offset, client connections. JSON bodies; mqadmin renders them.

UPDATE_BROKER_CONFIG applies only keys that take effect without a restart
(``RUNTIME_KEYS``); any other key, an unknown one or a bad value is refused with the
key named, and nothing of that request is applied.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from mqcluster.broker.config import SECRET_KEYS
from mqcluster.broker.context import BrokerContext
from mqcluster.common.config import parse_properties
from mqcluster.common.javaints import INT64_MAX
from mqcluster.protocol.broker import BrokerResponseCode, RequestCode
from mqcluster.wire.frame import RemotingCommand
from mqcluster.wire.rpc import Connection, HandlerRegistry

RUNTIME_KEYS = frozenset({
    "brokerPermission", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
    "defaultTopicQueueNums", "slaveTimeout", "allAckInSyncStateSet", "inSyncReplicas",
    "minInSyncReplicas", "haMaxTimeSlaveNotCatchup",
})


def _json(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


class OpsHandlers:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(RequestCode.GET_BROKER_CONFIG, self.get_config)
        registry.register(RequestCode.UPDATE_BROKER_CONFIG, self.update_config)
        registry.register(RequestCode.GET_CONSUME_STATS, self.consume_stats)
        registry.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message)
        registry.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.producers)
        registry.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.consumers)

    async def get_config(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        values = self.ctx.config.model_dump(mode="json")
        for key in SECRET_KEYS & values.keys():
            if values[key]:
                values[key] = "******"
        text = "".join(f"{k}={'' if v is None else v}\n" for k, v in sorted(values.items()))
        return cmd.response(body=text.encode("utf-8"))

    async def update_config(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        try:
            changes = parse_properties((cmd.body or b"").decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return cmd.response(BrokerResponseCode.INVALID_REQUEST, remark=str(exc))
        known = type(self.ctx.config).model_fields
        for key in changes:
            if key not in known:
                return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                    remark=f"unknown broker config key {key!r}")
            if key not in RUNTIME_KEYS:
                return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                    remark=f"{key!r} takes effect only after a restart: change "
                                           f"it in the broker's config file")
        try:
            updated = self.ctx.config.model_validate(
                {**self.ctx.config.model_dump(), **changes})
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                remark=f"invalid value for key {key!r}: {err['msg']}")
        problems = [(k, m) for k, m in updated.cross_field_problems() if k in changes]
        if problems:
            key, msg = problems[0]
            return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                remark=f"invalid value for key {key!r}: {msg}")
        self.ctx.update_config(updated)
        return cmd.response()

    async def consume_stats(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ext = cmd.ext_fields or {}
        group = ext.get("consumerGroup", "")
        only_topic = ext.get("topic") or None
        store = self.ctx.store
        if not group:
            return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                remark="consumerGroup is required")
        rows: list[dict[str, Any]] = []
        for topic, queue_id in store.queues():
            if only_topic is not None and topic != only_topic:
                continue
            committed = store.offsets.query(group, topic, queue_id)
            if committed < 0 and only_topic is None:
                continue
            max_offset = store.max_offset(topic, queue_id)
            consumer = max(committed, 0)
            rows.append({"topic": topic, "brokerName": self.ctx.broker_name,
                         "queueId": queue_id, "brokerOffset": max_offset,
                         "consumerOffset": consumer, "diff": max(0, max_offset - consumer)})
        return cmd.response(body=_json({"offsetTable": rows}))

    async def view_message(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        raw = (cmd.ext_fields or {}).get("offset", "")
        try:
            offset = int(raw)
        except ValueError:
            return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                remark=f"offset {raw[:40]!r} is not a number")
        if not 0 <= offset <= INT64_MAX:
            return cmd.response(BrokerResponseCode.INVALID_REQUEST,
                                remark=f"offset={offset} is outside 0..{INT64_MAX}")
        msg = self.ctx.store.get_message_by_offset(offset)
        if msg is None:
            return cmd.response(BrokerResponseCode.SYSTEM_ERROR,
                                remark=f"no message at commitlog offset {offset}")
        body = {
            "topic": msg.topic, "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
            "commitLogOffset": msg.commitlog_offset, "msgId": msg.msg_id,
            "offsetMsgId": msg.offset_msg_id, "tags": msg.tags, "keys": msg.keys,
            "bornTimestamp": msg.born_timestamp, "storeTimestamp": msg.store_timestamp,
            "bornHost": msg.born_host, "storeHost": msg.store_host,
            "properties": msg.properties, "storeSize": msg.store_size,
            "body": msg.body.decode("utf-8", errors="replace"),
        }
        return cmd.response(body=_json(body))

    async def producers(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        ext = cmd.ext_fields or {}
        topic = ext.get("topic") or None
        group = ext.get("producerGroup") or None
        sessions = [s for s in self.ctx.client_sessions() if s["kind"] == "PRODUCER"
                    and (topic is None or topic in s["topics"])
                    and (group is None or s.get("group") in (None, group))]
        return cmd.response(body=_json({"connectionSet": sessions}))

    async def consumers(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        group = (cmd.ext_fields or {}).get("consumerGroup", "")
        sessions = [s for s in self.ctx.client_sessions()
                    if s["kind"] != "PRODUCER" and s.get("group") == group]
        return cmd.response(body=_json({"connectionSet": sessions}))
