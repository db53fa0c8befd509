"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320)."""

from __future__ import annotations

from mqcluster.broker.messaging.send import SendOutcome, SendRequest, SendService
from mqcluster.broker.remoting_status import PUT_STATUS_CODES, REFUSAL_CODES
from mqcluster.protocol.broker import (
    BrokerResponseCode,
    RequestCode,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    v2_field_names,
)
from mqcluster.protocol.messages import (
    CodecError,
    RawMessages,
    WireMessage,
    decode_batch,
    decode_batch_raw,
    decode_properties,
    decode_single_raw,
)
from mqcluster.store.codec import consumes_queue_offset
from mqcluster.store.message import PutStatus
from mqcluster.wire.frame import RemotingCommand, frame_of
from mqcluster.wire.header import HeaderError
from mqcluster.wire.rpc import Answer, Connection, HandlerRegistry, error_response

# Plain ints: comparing with an IntEnum member looks it up through a descriptor each time.
_SEND_MESSAGE_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
_SUCCESS = int(BrokerResponseCode.SUCCESS)


class SendHandlers:
    def __init__(self, service: SendService) -> None:
        self.service = service

    def register(self, registry: HandlerRegistry) -> None:
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                     RequestCode.SEND_BATCH_MESSAGE):
            registry.register_batch(code, self.send_many)

    async def send_many(self, cmds: list[RemotingCommand], conn: Connection) -> list[Answer]:
        """The send requests read together from one connection, stored together
        (``SendService.send_many``); each gets its own answer, a bad one its error."""
        answers: list[Answer | None] = [None] * len(cmds)
        requests: list[SendRequest] = []
        slots: list[int] = []
        for i, cmd in enumerate(cmds):
            try:
                requests.append(self._request(cmd, conn))
                slots.append(i)
            except CodecError as exc:
                answers[i] = cmd.response(BrokerResponseCode.MESSAGE_ILLEGAL, remark=str(exc))
            except Exception as exc:
                answers[i] = error_response(cmd, exc)
        if requests:
            outcomes = await self.service.send_many(requests)
            for i, outcome in zip(slots, outcomes, strict=True):
                answers[i] = _response(cmds[i], outcome)
        return [a for a in answers if a is not None]

    def _request(self, cmd: RemotingCommand, conn: Connection) -> SendRequest:
        if cmd.code == _SEND_MESSAGE_V2:
            try:
                header = SendMessageRequestHeaderV2.from_ext(cmd.ext_fields)
            except HeaderError as exc:
                raise HeaderError(v2_field_names(str(exc))) from None
        else:
            header = SendMessageRequestHeader.from_ext(cmd.ext_fields)
        raw: RawMessages | None = None
        messages: list[WireMessage] = []
        if consumes_queue_offset(header.sysFlag):
            raw = (
                decode_batch_raw(cmd.body)
                if self._is_batch(cmd, header)
                else decode_single_raw(cmd.body, header.properties, header.flag)
            )
        if raw is None:
            messages = self._messages(cmd, header)
        return SendRequest(
            topic=header.topic,
            messages=messages,
            raw=raw,
            queue_id=header.queueId,
            producer_group=header.producerGroup,
            born_host=conn.peer,
            born_timestamp=header.bornTimestamp,
            sys_flag=header.sysFlag,
            reconsume_times=header.reconsumeTimes,
            default_queue_nums=header.defaultTopicQueueNums,
        )

    @staticmethod
    def _is_batch(cmd: RemotingCommand, header: SendMessageRequestHeader) -> bool:
        return cmd.code == _SEND_BATCH_MESSAGE or header.batch

    def _messages(
        self, cmd: RemotingCommand, header: SendMessageRequestHeader
    ) -> list[WireMessage]:
        if self._is_batch(cmd, header):
            return decode_batch(cmd.body)
        props = decode_properties(header.properties)
        return [WireMessage.from_properties(cmd.body, props, header.flag)]


def _response(cmd: RemotingCommand, outcome: SendOutcome) -> Answer:
    refusal = outcome.refusal
    if refusal is not None:
        return cmd.response(REFUSAL_CODES[refusal.reason], remark=refusal.remark)
    status = outcome.status
    if status is PutStatus.PUT_OK:
        return _stored_frame(cmd.opaque, outcome)
    code = PUT_STATUS_CODES.get(status, BrokerResponseCode.SYSTEM_ERROR)
    if not outcome.offset_msg_ids:  # (not stored)
        return cmd.response(code, remark=outcome.remark or f"store answered {status.value}")
    fields = {
        "msgId": ",".join(outcome.offset_msg_ids),
        "queueId": str(outcome.queue_id),
        "queueOffset": str(outcome.queue_offset),
    }
    return cmd.response(code, remark=f"store answered {status.value}", ext_fields=fields)


_STORED_HEADER = (
    '{"code":%d,"opaque":%d,"flag":1,"language":"PYTHON","version":0,'
    '"extFields":{"msgId":"%s","queueId":"%d","queueOffset":"%d"}}'
)


def _stored_frame(opaque: int, outcome: SendOutcome) -> bytes:
    """The frame ``cmd.response(...)`` encodes to, written straight: every value is a
    number or hexadecimal ids, which JSON needs no escaping for (about a third of the
    time of the general encoder and the command object)."""
    header = _STORED_HEADER % (_SUCCESS, opaque, ",".join(outcome.offset_msg_ids),
                               outcome.queue_id, outcome.queue_offset)
    return frame_of(header.encode("ascii"))
