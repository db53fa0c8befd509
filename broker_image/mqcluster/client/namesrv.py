"""Async client of the name servers: broker registration and route queries.

Registration goes to every name server (each keeps its own table); queries
go to one name server at a time and fall through to the next on failure.
The client keeps one connection per name server: a name server drops a
broker as soon as the connection that registered it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from mqcluster.protocol.namesrv import (
    BrokerRegistration,
    ClusterInfo,
    NamesrvResponseCode,
    RegisterBrokerResponseHeader,
    RegisterBrokerResult,
    RequestCode,
    TopicList,
    TopicRouteData,
    UnRegisterBrokerRequestHeader,
    encode_get_route,
    encode_register_broker,
    encode_simple,
    encode_unregister_broker,
    parse_body,
)
from mqcluster.wire.frame import FrameError, RemotingCommand, ResponseCode
from mqcluster.wire.rpc import RpcClient, RpcError

log = logging.getLogger(__name__)


class NamesrvError(Exception):
    """A name server request failed (unreachable, timed out or refused)."""


class TopicNotExistError(NamesrvError):
    """No name server knows a route for the topic."""


def parse_addrs(value: str | Sequence[str]) -> list[str]:
    """``"a:9876;b:9876"`` (RocketMQ's namesrvAddr form) or a list -> list of addresses."""
    items = value.split(";") if isinstance(value, str) else list(value)
    return [a.strip() for item in items for a in item.split(",") if a.strip()]


@dataclass(frozen=True)
class RegisterOutcome:
    """The answer of one name server to one registration."""

    addr: str
    result: RegisterBrokerResult | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class NamesrvClient:
    def __init__(
        self,
        addrs: Sequence[str] | str,
        *,
        timeout: float = 3.0,
        connect_timeout: float = 1.0,
        rpc: RpcClient | None = None,
    ) -> None:
        self.addrs = parse_addrs(addrs)
        if not self.addrs:
            raise ValueError("no name server address given")
        self.timeout = timeout
        self._rpc = rpc or RpcClient(connect_timeout=connect_timeout)
        self._owns_rpc = rpc is None
        self._next = 0

    async def close(self) -> None:
        if self._owns_rpc:
            await self._rpc.close()

    async def __aenter__(self) -> NamesrvClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ broker side

    async def register_broker(self, reg: BrokerRegistration) -> list[RegisterOutcome]:
        """Register with every name server at once; one outcome per address."""
        return list(await asyncio.gather(*(self._register_one(addr, reg) for addr in self.addrs)))

    async def _invoke_fresh(
        self, addr: str, build: Callable[[], RemotingCommand]
    ) -> RemotingCommand:
        """Invoke; if a cached connection turns out dead (peer restarted), retry once anew."""
        try:
            return await self._rpc.invoke(addr, build(), self.timeout)
        except RpcError as exc:
            stale = "closed" in str(exc) or str(exc).startswith("send to")
            if not stale:
                raise
            return await self._rpc.invoke(addr, build(), self.timeout)

    async def _register_one(self, addr: str, reg: BrokerRegistration) -> RegisterOutcome:
        try:
            resp = await self._invoke_fresh(addr, lambda: encode_register_broker(reg))
        except RpcError as exc:
            return RegisterOutcome(addr, error=str(exc))
        if resp.code != ResponseCode.SUCCESS:
            return RegisterOutcome(addr, error=_refusal(addr, resp))
        header = RegisterBrokerResponseHeader.from_ext(resp.ext_fields)
        return RegisterOutcome(
            addr,
            result=RegisterBrokerResult(
                haServerAddr=header.haServerAddr, masterAddr=header.masterAddr
            ),
        )

    async def unregister_broker(
        self, cluster_name: str, broker_name: str, broker_addr: str, broker_id: int
    ) -> list[RegisterOutcome]:
        header = UnRegisterBrokerRequestHeader(
            clusterName=cluster_name,
            brokerName=broker_name,
            brokerAddr=broker_addr,
            brokerId=broker_id,
        )

        async def one(addr: str) -> RegisterOutcome:
            try:
                resp = await self._invoke_fresh(addr, lambda: encode_unregister_broker(header))
            except RpcError as exc:
                return RegisterOutcome(addr, error=str(exc))
            if resp.code != ResponseCode.SUCCESS:
                return RegisterOutcome(addr, error=_refusal(addr, resp))
            return RegisterOutcome(addr)

        return list(await asyncio.gather(*(one(a) for a in self.addrs)))

    # ------------------------------------------------------------ queries

    async def get_route(self, topic: str) -> TopicRouteData:
        resp = await self._query(lambda: encode_get_route(topic))
        if resp.code == NamesrvResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotExistError(f"topic {topic!r} does not exist: {resp.remark or ''}".strip())
        return _body(TopicRouteData, resp)

    async def get_cluster_info(self) -> ClusterInfo:
        resp = await self._query(lambda: encode_simple(RequestCode.GET_BROKER_CLUSTER_INFO))
        return _body(ClusterInfo, resp)

    async def get_topic_list(self) -> list[str]:
        resp = await self._query(
            lambda: encode_simple(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
        return sorted(_body(TopicList, resp).topicList)

    async def _query(self, build: Callable[[], RemotingCommand]) -> RemotingCommand:
        """Ask the name servers in turn; the first answer wins (TOPIC_NOT_EXIST included)."""
        errors: list[str] = []
        n = len(self.addrs)
        for i in range(n):
            addr = self.addrs[(self._next + i) % n]
            try:
                resp = await self._invoke_fresh(addr, build)
            except RpcError as exc:
                errors.append(str(exc))
                continue
            self._next = (self._next + i) % n
            if resp.code not in (ResponseCode.SUCCESS, NamesrvResponseCode.TOPIC_NOT_EXIST):
                raise NamesrvError(_refusal(addr, resp))
            return resp
        raise NamesrvError("; ".join(errors) or "no name server answered")


M = TypeVar("M", bound=BaseModel)


def _body(model: type[M], resp: RemotingCommand) -> M:
    try:
        return parse_body(model, resp)
    except FrameError as exc:
        raise NamesrvError(str(exc)) from exc


def _refusal(addr: str, resp: RemotingCommand) -> str:
    return f"{addr} answered code {resp.code}: {resp.remark or 'no remark'}"


class BrokerRegistrar:
    """Registers a broker with every name server now and then every ``interval`` seconds.

    ``registration`` is called before every round, so topic or role changes
    go out with the next round; :meth:`trigger` starts a round at once.
    ``on_outcomes`` sees each round's answers (a slave learns its master's
    address there). :meth:`stop` ends the task and, unless told otherwise,
    unregisters from every name server.
    """

    def __init__(
        self,
        client: NamesrvClient,
        registration: Callable[[], BrokerRegistration],
        *,
        interval: float = 30.0,
        on_outcomes: Callable[[list[RegisterOutcome]], Awaitable[None] | None] | None = None,
        unregister_on_stop: bool = True,
    ) -> None:
        if interval <= 0:
            raise ValueError("registration interval must be positive")
        self.client = client
        self.registration = registration
        self.interval = interval
        self.on_outcomes = on_outcomes
        self.unregister_on_stop = unregister_on_stop
        self.rounds = 0
        self._rounds_started = 0
        self.last_outcomes: list[RegisterOutcome] = []
        self._wake = asyncio.Event()
        self._round_done = asyncio.Condition()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._last_reg: BrokerRegistration | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="broker-registrar")

    def trigger(self) -> None:
        """Register again now instead of waiting for the next period."""
        self._wake.set()

    async def registered(self) -> None:
        """Wait for a round that starts after this call (what changed before it has gone out)."""
        target = self._rounds_started + 1
        self.trigger()
        await self.wait_rounds(target)

    async def wait_rounds(self, n: int) -> None:
        """Wait until at least ``n`` rounds have completed."""
        async with self._round_done:
            await self._round_done.wait_for(lambda: self.rounds >= n)

    async def register_once(self) -> list[RegisterOutcome]:
        reg = self.registration()
        self._last_reg = reg
        outcomes = await self.client.register_broker(reg)
        for out in outcomes:
            if not out.ok:
                log.warning(
                    "register broker %s with %s failed: %s", reg.brokerName, out.addr, out.error
                )
        self.last_outcomes = outcomes
        if self.on_outcomes is not None:
            res = self.on_outcomes(outcomes)
            if res is not None:
                await res
        return outcomes

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            self._rounds_started += 1
            try:
                await self.register_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker registration round failed")
            async with self._round_done:
                self.rounds += 1
                self._round_done.notify_all()
            if self._stopping:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        reg = self._last_reg
        if self.unregister_on_stop and reg is not None:
            await self.client.unregister_broker(
                reg.clusterName, reg.brokerName, reg.brokerAddr, reg.brokerId
            )
