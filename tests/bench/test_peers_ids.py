"""Every body the peers bench sends carries its own id; only acknowledged ids count."""

from __future__ import annotations

import contextlib
import itertools

from bench.peer_table import Ledger
from bench.peers_bench import MSG_SIZE, counted, id_of


async def test_each_send_carries_the_next_id_and_acks_are_recorded() -> None:
    bodies: list[bytes] = []

    async def publish(body: bytes) -> object:
        bodies.append(body)
        if id_of(body) == 2:
            raise ConnectionError("not acknowledged")
        return None

    ledger = Ledger()
    ids = itertools.count()
    send, other = counted(publish, ledger, ids), counted(publish, ledger, ids)
    for s in (send, send, send, other):
        with contextlib.suppress(ConnectionError):
            await s()
    assert [id_of(b) for b in bodies] == [0, 1, 2, 3], "one counter shared by both"
    assert {len(b) for b in bodies} == {MSG_SIZE}
    assert ledger.acked == {0, 1, 3}


async def test_a_sender_of_its_own_counts_from_zero() -> None:
    async def publish(body: bytes) -> object:
        return None

    ledger = Ledger()
    send = counted(publish, ledger)
    await send()
    await send()
    assert ledger.acked == {0, 1}
