"""Child process for the crash test: SYNC_FLUSH producers that print every acknowledged put.

Usage: ``python crash_writer.py <store root> <round>``. Prints ``READY``, then one line
``ACK <commitlog offset> <topic> <queue id> <queue offset> <key>`` per acknowledged
message, until it is killed.
"""

from __future__ import annotations

import asyncio
import sys

from mqcluster.store import FlushDiskType, MessageRecord, MessageStore, PutStatus, StoreConfig

PRODUCERS = 16


async def producer(store: MessageStore, round_no: str, worker: int) -> None:
    seq = 0
    while True:
        key = f"r{round_no}-w{worker}-{seq}"
        batch = worker % 4 == 0
        recs = [MessageRecord(f"T{worker % 2}", worker % 3, key.encode() * 20, tags="t",
                              keys=[f"{key}-{j}" if batch else key], born_timestamp=seq)
                for j in range(3 if batch else 1)]
        results = await store.put_messages(recs)
        for r, m in zip(results, recs, strict=True):
            if r.status is PutStatus.PUT_OK:
                sys.stdout.write(f"ACK {r.commitlog_offset} {m.topic} {m.queue_id} "
                                 f"{r.queue_offset} {m.keys[0]}\n")
        sys.stdout.flush()
        seq += 1


async def main(root: str, round_no: str) -> None:
    config = StoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=64 * 1024,
                         mappedFileSizeConsumeQueue=20 * 100,
                         flushDiskType=FlushDiskType.SYNC_FLUSH, flushIntervalConsumeQueue=50)
    store = MessageStore(config)
    await store.start()
    print("READY", flush=True)
    await asyncio.gather(*(producer(store, round_no, w) for w in range(PRODUCERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
