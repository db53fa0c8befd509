"""Demo: a 3-member DLedger-style Raft group surviving the loss of its leader.

    python -m mqcluster.demo      (or: make demo)

Starts three ``mqraft`` processes on 127.0.0.x, proposes entries, SIGKILLs the
leader, shows the new leader and how long the election took, shows that every
committed entry is still there, restarts the old leader and shows it catch up.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mqcluster.raft.client import RaftClient
from mqcluster.raft.localgroup import LocalGroup


def say(text: str = "") -> None:
    print(text, flush=True)


def table(peers: dict[str, str], docs: dict[str, dict[str, Any] | None]) -> str:
    header = f"  {'node':<5} {'address':<22} {'role':<10} {'term':>4} {'commit':>6} "
    header += f"{'applied':>7} {'values':>6}  digest"
    lines = [header]
    for node_id, addr in peers.items():
        doc = docs.get(node_id)
        if doc is None:
            lines.append(f"  {node_id:<5} {addr:<22} (down)")
            continue
        lines.append(
            f"  {node_id:<5} {addr:<22} {doc['role']:<10} {doc['term']:>4} "
            f"{doc['commitIndex']:>6} {doc['appliedIndex']:>7} {doc['count']:>6}  "
            f"{doc['digest']:08x}"
        )
    return "\n".join(lines)


async def wait_settled(client: RaftClient, members: list[str], timeout: float = 5.0) -> None:
    """Until every listed member names the same leader and has applied the same index."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        docs = [await client.status(n) for n in members]
        if all(docs) and len({(d["leader"], d["appliedIndex"]) for d in docs if d}) == 1:
            return
        await asyncio.sleep(0.02)


async def wait_caught_up(client: RaftClient, node_id: str, reference: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine, ref = await client.status(node_id), await client.status(reference)
        if mine and ref and (mine["count"], mine["digest"]) == (ref["count"], ref["digest"]):
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"{node_id} did not catch up with {reference} in {timeout} s")


async def run(root: Path) -> None:
    with LocalGroup(root) as group:
        client = RaftClient(group.peers)
        try:
            say("== 1. start three mqraft members")
            group.start_all()
            t0 = time.monotonic()
            leader = await client.wait_leader(timeout=15)
            took = time.monotonic() - t0
            say(f"   first leader: {leader} ({took:.2f} s after launching the processes)")
            await wait_settled(client, list(group.peers))
            say(table(group.peers, await client.statuses()))

            say("\n== 2. propose five entries")
            for i in range(1, 6):
                first, _ = await client.propose([f"order-{i}".encode()])
                say(f"   order-{i} committed at position {first}")

            say(f"\n== 3. SIGKILL the leader {leader}")
            group.kill(leader)
            t_kill = time.monotonic()
            new_leader = await client.wait_leader(timeout=10, exclude=[leader], poll=0.005)
            elapsed = time.monotonic() - t_kill
            say(f"   new leader: {new_leader}, elected {elapsed * 1000:.0f} ms after the kill")
            for i in range(6, 9):
                first, _ = await client.propose([f"order-{i}".encode()])
                say(f"   order-{i} committed at position {first} (leader {client.leader})")
            await wait_settled(client, [n for n in group.peers if n != leader])
            say(table(group.peers, await client.statuses()))
            survivor = new_leader
            values = (await client.read(survivor))["values"]
            say(f"   values on {survivor}: {', '.join(v.decode() for v in values)}")
            expected = [f"order-{i}".encode() for i in range(1, 9)]
            ok = values == expected
            say(f"   {'all 8 committed entries present, in order' if ok else 'MISMATCH'}")

            say(f"\n== 4. restart {leader}; it catches up from the new leader")
            group.start(leader)
            t_restart = time.monotonic()
            await wait_caught_up(client, leader, survivor, timeout=15)
            say(f"   {leader} caught up {time.monotonic() - t_restart:.2f} s after restart")
            say(table(group.peers, await client.statuses()))
            restored = (await client.read(leader))["values"]
            same = restored == values
            say(f"   values on {leader}: {'identical to ' + survivor if same else 'DIFFERENT'}")
            if not same or values != expected:
                raise SystemExit(1)
        finally:
            await client.close()
    say("\n== done: processes stopped, temporary directory removed")


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mqraft-demo-") as tmp:
        try:
            asyncio.run(run(Path(tmp)))
        except BaseException:
            for log in sorted(Path(tmp).glob("*.log")):
                say(f"--- {log.name} (last lines)")
                say("\n".join(log.read_text(errors="replace").splitlines()[-15:]))
            raise
    say(f"   total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
