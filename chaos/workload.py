"""Producer and consumer processes that write JSON-lines histories (format in
``mqcluster_audit.history``); the runner starts them inside the client host.

    python -m chaos.workload produce --endpoints E --topic T --client p0 --out p0.jsonl
    python -m chaos.workload consume --endpoints E --topic T --group G --client c0 --out c0.jsonl

The producer sends FIFO messages round-robin over ``--message-groups`` groups with the
official RocketMQ 5 client, one at a time; the key ``<client>-<group>-<seq>`` is also
the body, so stores and receipts map back to a send. Every attempt the client makes at
a message, its own retries included, writes a ``send`` event (with ``attempt`` and the
message id), so the checker can tell a client's retry stored twice from a store
duplicate. SIGTERM ends either cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

from mqcluster_audit.history import HistoryWriter


def parse_key(key: str) -> tuple[str, int] | None:
    """``p0-g3-17`` -> (``p0-g3``, 17): the message group and its seq."""
    group, _, seq = key.rpartition("-")
    return (group, int(seq)) if group and seq.isdigit() else None


def config(endpoints: str) -> ClientConfiguration:
    # The client builds grpc.aio objects on the calling thread, which needs a loop.
    asyncio.set_event_loop(asyncio.new_event_loop())
    return ClientConfiguration(endpoints, Credentials(), request_timeout=3)


SEND_ATTEMPT = "_Producer__send"
"""The official producer's method that makes one attempt (it calls itself again for a
retry, through the instance): wrapped to write a ``send`` event for each attempt."""


def record_attempts(p: Producer, out: HistoryWriter, current: dict[str, Any]) -> None:
    """Write a ``send`` event for the message ``current`` describes (its ``key`` and the
    other fields of its events) before every attempt ``p`` makes at it."""
    attempt_once = getattr(p, SEND_ATTEMPT, None)
    if attempt_once is None:
        raise RuntimeError(f"rocketmq.Producer has no {SEND_ATTEMPT}: the history could not "
                           f"show the client's retries; update chaos.workload")

    def attempt(message: Message, topic_queue: object, attempt: int = 1) -> object:
        fields = {k: v for k, v in current.items() if k != "key"}
        out.write("send", current["key"], **fields, attempt=attempt,
                  msg_id=message.message_id)
        return attempt_once(message, topic_queue, attempt)

    setattr(p, SEND_ATTEMPT, attempt)


def produce(a: argparse.Namespace, stop: threading.Event, out: HistoryWriter) -> None:
    p = Producer(config(a.endpoints), (a.topic,))
    current: dict[str, Any] = {}
    record_attempts(p, out, current)
    p.startup()
    seqs = [0] * a.message_groups
    try:
        n = 0
        while not stop.is_set():
            g = n % a.message_groups
            n += 1
            group = f"{a.client}-g{g}"
            key = f"{group}-{seqs[g]}"
            fields = {"topic": a.topic, "message_group": group, "seq": seqs[g]}
            seqs[g] += 1
            m = Message()
            m.topic, m.body, m.keys, m.message_group = a.topic, key.encode(), key, group
            current.clear()
            current.update(fields, key=key)
            try:
                receipt = p.send(m)
            except Exception as exc:  # the client gave up: the history says so
                out.write("fail", key, **fields, error=type(exc).__name__)
                time.sleep(0.05)  # no broker: do not spin
                continue
            out.write("ack", key, **fields, msg_id=receipt.message_id)
    finally:
        p.shutdown()


def consume(a: argparse.Namespace, stop: threading.Event, out: HistoryWriter) -> None:
    c = SimpleConsumer(config(a.endpoints), a.group, {a.topic: FilterExpression("*")},
                       await_duration=1)
    c.startup()
    try:
        while not stop.is_set():
            try:
                messages = c.receive(32, 10)
            except Exception:
                time.sleep(0.1)
                continue
            for m in messages:
                key = m.body.decode()
                parsed = parse_key(key)
                out.write("receive", key, topic=a.topic, group=a.group, msg_id=m.message_id,
                          message_group=m.message_group,
                          seq=parsed[1] if parsed else None)
                with contextlib.suppress(Exception):  # unacked: delivered again later
                    c.ack(m)
    finally:
        c.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="chaos.workload")
    p.add_argument("role", choices=["produce", "consume"])
    p.add_argument("--endpoints", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--client", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--group", default="ChaosGroup")
    p.add_argument("--message-groups", type=int, default=4)
    a = p.parse_args(argv)
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    with open(a.out, "a", buffering=1) as f:  # line-buffered: every event reaches the file
        out = HistoryWriter(f, a.client)
        print(f"{a.role} started", flush=True)
        (produce if a.role == "produce" else consume)(a, stop, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
