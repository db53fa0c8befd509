"""Serves consumers' pulls: topic and group checks, tag filter, long polling."""

from __future__ import annotations

from dataclasses import dataclass, field

from mqcluster.broker.context import BrokerContext
from mqcluster.broker.long_poll import ArrivalNotifier
from mqcluster.broker.messaging.access import Caller, check_read_queue
from mqcluster.broker.messaging.refusal import Refusal
from mqcluster.broker.remoting_status import REFUSAL_CODES
from mqcluster.broker.request_checks import names_rejection
from mqcluster.broker.topic_service import TopicService
from mqcluster.protocol.broker import BrokerResponseCode, PullMessageRequestHeader
from mqcluster.store.filter import TagFilter
from mqcluster.store.message import GetResult, GetStatus, StoredMessage

FLAG_COMMIT_OFFSET = 0x1
MAX_SUSPEND_SECONDS = 30.0

GET_STATUS_CODES: dict[GetStatus, int] = {
    GetStatus.FOUND: BrokerResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: BrokerResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: BrokerResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: BrokerResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: BrokerResponseCode.PULL_NOT_FOUND,
    GetStatus.NO_MATCHED_LOGIC_QUEUE: BrokerResponseCode.PULL_NOT_FOUND,
    GetStatus.NO_MESSAGE_IN_QUEUE: BrokerResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: BrokerResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: BrokerResponseCode.PULL_OFFSET_MOVED,
}
_WAITABLE = frozenset(
    {GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE}
)


@dataclass
class PullOutcome:
    code: int
    remark: str | None = None
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    messages: list[StoredMessage] = field(default_factory=list)


class PullService:
    def __init__(self, ctx: BrokerContext, topics: TopicService, arrivals: ArrivalNotifier) -> None:
        self.ctx = ctx
        self.topics = topics
        self.arrivals = arrivals

    def _check(self, h: PullMessageRequestHeader) -> PullOutcome | TagFilter | None:
        bad = names_rejection(h.topic)  # (the group's name: consuming_group)
        if bad is not None:
            return PullOutcome(bad.code, bad.remark)
        caller = Caller(h.consumerGroup)
        access = self.topics.access
        try:
            check_read_queue(h.queueId, access.for_read(h.topic, caller))
            access.consuming_group(h.consumerGroup, caller)
        except Refusal as refusal:
            return PullOutcome(REFUSAL_CODES[refusal.reason], refusal.remark)
        if h.expressionType.upper() != "TAG":
            return PullOutcome(
                BrokerResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"expressionType {h.expressionType!r} is not supported; use TAG",
            )
        tag_filter = TagFilter.of(h.subscription or "*")
        return None if tag_filter.matches_all else tag_filter

    async def pull(self, h: PullMessageRequestHeader) -> PullOutcome:
        checked = self._check(h)
        if isinstance(checked, PullOutcome):
            return checked
        if h.sysFlag & FLAG_COMMIT_OFFSET and h.commitOffset >= 0:
            self.ctx.store.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        max_nums = min(h.maxMsgNums, self.ctx.config.maxPullBatchSize)
        result = self._get(h, max_nums, checked)
        if result.status in _WAITABLE and h.suspendTimeoutMillis > 0:
            timeout = min(h.suspendTimeoutMillis / 1000.0, MAX_SUSPEND_SECONDS)
            if await self.arrivals.wait(h.topic, h.queueId, timeout):
                result = self._get(h, max_nums, checked)
        code = GET_STATUS_CODES.get(result.status, BrokerResponseCode.PULL_NOT_FOUND)
        if result.messages:
            nbytes = sum(len(m.body) for m in result.messages)
            self.ctx.metrics.record_get(h.topic, len(result.messages), nbytes)
        return PullOutcome(
            code=code,
            remark=None if code == BrokerResponseCode.SUCCESS else result.status.value,
            next_begin_offset=result.next_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            messages=result.messages,
        )

    def _get(
        self, h: PullMessageRequestHeader, max_nums: int, tag_filter: TagFilter | None
    ) -> GetResult:
        return self.ctx.store.get_messages(h.topic, h.queueId, h.queueOffset, max_nums, tag_filter)
