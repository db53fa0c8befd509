"""Typed calls of the broker's request codes over one shared RpcClient.

One method per request code; a non-success answer raises BrokerError with the
broker's code and remark. Higher layers (Producer, PullConsumer, AdminClient)
add routing and queue selection.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from mqcluster.auth.credentials import Credentials
from mqcluster.client.credentials import signer_of
from mqcluster.client.errors import BrokerError, ClientError
from mqcluster.client.message import PullResult, PullStatus
from mqcluster.client.send_header import send_header_v1, send_response, send_v2_frame
from mqcluster.protocol.broker import (
    BrokerResponseCode,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    RequestCode,
    SearchOffsetRequestHeader,
    SendMessageResponseHeader,
    SubscriptionGroupConfig,
    UpdateConsumerOffsetRequestHeader,
)
from mqcluster.protocol.controller import NotifyBrokerRoleChangedRequestHeader, request
from mqcluster.protocol.controller import RequestCode as ControllerCode
from mqcluster.protocol.messages import (
    CodecError,
    WireMessage,
    decode_pulled,
    encode_batch,
    encode_properties,
)
from mqcluster.protocol.namesrv import TopicConfig, TopicConfigSerializeWrapper
from mqcluster.wire.frame import FrameError, RemotingCommand
from mqcluster.wire.header import Header
from mqcluster.wire.rpc import RpcClient, RpcError

DEFAULT_TIMEOUT = 5.0

_PULL_STATUS = {
    BrokerResponseCode.SUCCESS: PullStatus.FOUND,
    BrokerResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    BrokerResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    BrokerResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


class BrokerApi:
    def __init__(self, rpc: RpcClient | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 credentials: Credentials | None = None) -> None:
        """``credentials`` sign every request (ACL 2.0) of the client made here."""
        self.rpc = rpc or RpcClient(signer=signer_of(credentials))
        self._owns_rpc = rpc is None
        self.timeout = timeout

    async def close(self) -> None:
        if self._owns_rpc:
            await self.rpc.close()

    async def call(
        self,
        addr: str,
        cmd: RemotingCommand,
        *,
        ok: tuple[int, ...] = (BrokerResponseCode.SUCCESS,),
        timeout: float | None = None,
    ) -> RemotingCommand:
        try:
            resp = await self.rpc.invoke(addr, cmd, timeout or self.timeout)
        except RpcError as exc:
            raise ClientError(str(exc)) from exc
        return self._checked(addr, resp, ok)

    @staticmethod
    def _checked(addr: str, resp: RemotingCommand,
                 ok: tuple[int, ...] = (BrokerResponseCode.SUCCESS,)) -> RemotingCommand:
        """``resp``, if its code is one of ``ok``; else BrokerError."""
        if resp.code not in ok:
            raise BrokerError(resp.code, resp.remark, addr)
        return resp

    # ---------------------------------------------------------------- send

    async def send(
        self,
        addr: str,
        topic: str,
        msg: WireMessage,
        queue_id: int,
        *,
        producer_group: str = "DEFAULT_PRODUCER",
        born_timestamp: int = 0,
        default_queue_nums: int = 4,
    ) -> SendMessageResponseHeader:
        props = encode_properties(msg.all_properties())
        return await self.send_encoded(
            addr, topic, msg.body, props, queue_id, flag=msg.flag,
            producer_group=producer_group, born_timestamp=born_timestamp,
            default_queue_nums=default_queue_nums,
        )  # fmt: skip

    async def send_encoded(
        self,
        addr: str,
        topic: str,
        body: bytes,
        properties: str,
        queue_id: int,
        *,
        flag: int = 0,
        producer_group: str = "DEFAULT_PRODUCER",
        born_timestamp: int = 0,
        default_queue_nums: int = 4,
    ) -> SendMessageResponseHeader:
        """SEND_MESSAGE_V2 of one message whose properties string is already encoded."""
        def frame_for(opaque: int) -> bytes:
            return send_v2_frame(opaque, producer_group, topic, queue_id, born_timestamp,
                                 default_queue_nums, flag, properties, body)

        try:
            resp = await self.rpc.invoke_frame(addr, RequestCode.SEND_MESSAGE_V2, frame_for,
                                               self.timeout)
        except RpcError as exc:
            raise ClientError(str(exc)) from exc
        return send_response(addr, self._checked(addr, resp))

    async def send_batch(
        self,
        addr: str,
        topic: str,
        msgs: list[WireMessage],
        queue_id: int,
        *,
        producer_group: str = "DEFAULT_PRODUCER",
        born_timestamp: int = 0,
        default_queue_nums: int = 4,
    ) -> SendMessageResponseHeader:
        try:
            body = encode_batch(msgs)
        except CodecError as exc:
            raise ClientError(str(exc)) from exc
        return await self.send_batch_encoded(
            addr, topic, body, queue_id, producer_group=producer_group,
            born_timestamp=born_timestamp, default_queue_nums=default_queue_nums,
        )  # fmt: skip

    async def send_batch_encoded(
        self,
        addr: str,
        topic: str,
        body: bytes,
        queue_id: int,
        *,
        producer_group: str = "DEFAULT_PRODUCER",
        born_timestamp: int = 0,
        default_queue_nums: int = 4,
    ) -> SendMessageResponseHeader:
        """SEND_BATCH_MESSAGE with a body already in the batch layout (``encode_batch``)."""
        fields = send_header_v1(
            producer_group, topic, queue_id, born_timestamp, default_queue_nums, batch=True
        )
        cmd = RemotingCommand(code=RequestCode.SEND_BATCH_MESSAGE, ext_fields=fields, body=body)
        return send_response(addr, await self.call(addr, cmd))

    # ---------------------------------------------------------------- pull

    async def pull(
        self, addr: str, header: PullMessageRequestHeader, *, timeout: float | None = None
    ) -> PullResult:
        wait = header.suspendTimeoutMillis / 1000.0
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        resp = await self.call(
            addr, cmd, ok=tuple(_PULL_STATUS), timeout=timeout or self.timeout + wait
        )
        head = _parse(PullMessageResponseHeader, resp)
        status = _PULL_STATUS[BrokerResponseCode(resp.code)]
        try:
            messages = decode_pulled(resp.body) if status is PullStatus.FOUND else []
        except CodecError as exc:
            raise ClientError(f"bad pull response from {addr}: {exc}") from exc
        return PullResult(status, head.nextBeginOffset, head.minOffset, head.maxOffset, messages)

    # ---------------------------------------------------------------- offsets

    async def query_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int
    ) -> int | None:
        header = QueryConsumerOffsetRequestHeader(
            consumerGroup=group, topic=topic, queueId=queue_id
        )
        cmd = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        ok = (BrokerResponseCode.SUCCESS, BrokerResponseCode.QUERY_NOT_FOUND)
        resp = await self.call(addr, cmd, ok=ok)
        if resp.code == BrokerResponseCode.QUERY_NOT_FOUND:
            return None
        return _int_field(resp, "offset")

    async def update_consumer_offset(
        self, addr: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset
        )
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        await self.call(addr, cmd)

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(addr, RequestCode.GET_MAX_OFFSET, topic, queue_id)

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(addr, RequestCode.GET_MIN_OFFSET, topic, queue_id)

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        header = SearchOffsetRequestHeader(topic=topic, queueId=queue_id, timestamp=timestamp_ms)
        cmd = RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
        return _int_field(await self.call(addr, cmd), "offset")

    async def _offset(self, addr: str, code: RequestCode, topic: str, queue_id: int) -> int:
        header = GetMaxOffsetRequestHeader(topic=topic, queueId=queue_id)
        cmd = RemotingCommand.request(code, header.to_ext())
        return _int_field(await self.call(addr, cmd), "offset")

    # ---------------------------------------------------------------- admin

    async def create_topic(self, addr: str, header: CreateTopicRequestHeader) -> None:
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        await self.call(addr, cmd)

    async def delete_topic(self, addr: str, topic: str) -> None:
        header = DeleteTopicRequestHeader(topic=topic)
        cmd = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, header.to_ext())
        await self.call(addr, cmd)

    async def get_all_topic_config(self, addr: str) -> dict[str, TopicConfig]:
        resp = await self.call(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
        try:
            wrapper = TopicConfigSerializeWrapper.model_validate_json(resp.body or b"{}")
        except ValueError as exc:
            raise ClientError(f"bad topic config body from {addr}: {exc}") from exc
        return dict(wrapper.topicConfigTable)

    async def create_subscription_group(self, addr: str, cfg: SubscriptionGroupConfig) -> None:
        body = cfg.model_dump_json().encode("utf-8")
        cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        await self.call(addr, cmd)

    async def notify_role_changed(self, addr: str, header: NotifyBrokerRoleChangedRequestHeader,
                                  body: bytes, timeout: float) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (RIP-44): a controller tells a replica its group's
        master and SyncStateSet; what the broker answers is not looked at."""
        await self.rpc.invoke(
            addr, request(ControllerCode.NOTIFY_BROKER_ROLE_CHANGED, header, body), timeout)

    async def runtime_info(self, addr: str) -> dict[str, str]:
        resp = await self.call(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
        try:
            data: Any = json.loads(resp.body or b"{}")
            table = data.get("table", {})
        except (ValueError, AttributeError) as exc:
            raise ClientError(f"bad runtime info body from {addr}: {exc}") from exc
        return {str(k): str(v) for k, v in table.items()}


H = TypeVar("H", bound=Header)


def _parse(model: type[H], resp: RemotingCommand) -> H:
    try:
        return model.from_ext(resp.ext_fields)
    except FrameError as exc:
        raise ClientError(str(exc)) from exc


def _int_field(resp: RemotingCommand, name: str) -> int:
    try:
        return int(resp.ext_fields[name])
    except (KeyError, ValueError) as exc:
        raise ClientError(f"response lacks integer field {name!r}") from exc
