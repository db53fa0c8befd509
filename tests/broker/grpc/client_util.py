"""Helpers for driving the official RocketMQ 5 Python client (unmodified) in tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    SimpleConsumer,
)


def give_thread_an_event_loop() -> None:
    """Set an event loop on the calling thread if it has none.

    The official client can build grpc.aio objects on the thread that calls it, and
    grpc then asks that thread for its event loop. After ``asyncio.run()`` or an
    async test in the same thread, the main thread is left with none, and the
    client's telemetry stream (and with it every route lookup) fails with "There
    is no current event loop in thread 'MainThread'"."""
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


def client_config(address: str) -> ClientConfiguration:
    """Plaintext: a bare ``host:port`` endpoint and the clients' default ``tls_enable=False``."""
    give_thread_an_event_loop()
    return ClientConfiguration(address, Credentials(), request_timeout=5)


def new_message(topic: str, body: bytes, *, tag: str | None = None,
                keys: tuple[str, ...] = (), props: dict[str, str] | None = None,
                group: str | None = None, deliver_at_s: int | None = None) -> Message:
    m = Message()
    m.topic = topic
    m.body = body
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys[0] if len(keys) == 1 else keys  # the setter collects *args
    for k, v in (props or {}).items():
        m.add_property(k, v)
    if group:
        m.message_group = group
    if deliver_at_s is not None:
        m.delivery_timestamp = deliver_at_s
    return m


@contextmanager
def producer(address: str, topics: tuple[str, ...], checker: Any = None) -> Iterator[Producer]:
    p = Producer(client_config(address), topics, checker)
    p.startup()
    try:
        yield p
    finally:
        p.shutdown()


@contextmanager
def simple_consumer(address: str, group: str, topic: str, expression: str = "*",
                    await_s: int = 2) -> Iterator[SimpleConsumer]:
    c = SimpleConsumer(client_config(address), group, {topic: FilterExpression(expression)},
                       await_duration=await_s)
    c.startup()
    try:
        yield c
    finally:
        c.shutdown()


def receive_until(consumer: SimpleConsumer, count: int, *, invisible_s: int = 10,
                  deadline_s: float = 20, ack: bool = True) -> list[Message]:
    got: list[Message] = []
    give_up = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < give_up:
        for m in consumer.receive(32, invisible_s):
            got.append(m)
            if ack:
                consumer.ack(m)
    return got


class Collector(MessageListener):  # type: ignore[misc]
    """Records what a PushConsumer delivers; ``fail`` decides per message to fail it."""

    def __init__(self, fail: Callable[[Message], bool] = lambda m: False) -> None:
        self.messages: list[Message] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.fail = fail

    def consume(self, message: Message) -> ConsumeResult:
        failed = self.fail(message)
        with self.changed:
            self.messages.append(message)
            self.changed.notify_all()
        return ConsumeResult.FAILURE if failed else ConsumeResult.SUCCESS

    def wait_for(self, predicate: Callable[[list[Message]], bool], timeout_s: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: predicate(self.messages), timeout_s)
