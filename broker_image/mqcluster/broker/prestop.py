"""The broker pod's preStop hook: a master hands its role to an in-sync replica.

``python -m mqcluster.broker.prestop -c /var/run/mqcluster/broker.conf`` reads
the broker's own properties. In controller mode, when this broker is the
master, it asks the controller for a designated election of an alive in-sync
replica and waits until the controller names another master (or the timeout
passes). Anything else (a slave, another mode, no candidate) exits at once:
the hook must never keep a pod from stopping.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqcluster.protocol.election import Election, ReplicaState, election_of


@dataclass(frozen=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    address: str
    controller_addrs: tuple[str, ...]


def identity(props: dict[str, str]) -> BrokerIdentity | None:
    """This broker's identity in controller mode, None in any other mode."""
    if props.get("enableControllerMode", "").lower() != "true" or not props.get("controllerAddr"):
        return None
    host = props.get("brokerIP1") or "127.0.0.1"
    return BrokerIdentity(
        cluster=props.get("brokerClusterName", "DefaultCluster"),
        broker_name=props["brokerName"],
        address=f"{host}:{props.get('listenPort', '10911')}",
        controller_addrs=tuple(a for a in props["controllerAddr"].split(";") if a.strip()),
    )


def successor(master: str | None, me: str, replicas: Sequence[ReplicaState]) -> int | None:
    """The in-sync, alive replica to hand over to, when ``me`` is the master."""
    if master != me:
        return None
    candidates = sorted(
        r.broker_id for r in replicas
        if r.in_sync and r.alive and r.address != me and r.broker_id is not None
    )
    return candidates[0] if candidates else None


async def election(client: Any, broker_name: str) -> Election:
    """The group's master and replicas, as the controller's SyncStateSet table has them."""
    table = await client.get_sync_state_data([broker_name])
    return election_of(table.replicas_info_table.get(broker_name))


async def hand_over(me: BrokerIdentity, timeout: float, poll: float = 0.2) -> str:
    """Returns what happened, for the hook's log line."""
    from mqcluster.client.controller import ControllerClient

    wait = min(3.0, timeout)
    client = ControllerClient(list(me.controller_addrs), timeout=wait, retry_timeout=wait)
    deadline = time.monotonic() + timeout
    try:
        current = await election(client, me.broker_name)
        target = successor(current.master_address, me.address, current.replicas)
        if target is None:
            return "nothing to hand over"
        await client.elect_master(me.cluster, me.broker_name, target, designate=True)
        while time.monotonic() < deadline:
            current = await election(client, me.broker_name)
            if current.master_address != me.address:
                return f"handed over to {current.master_address}"
            await asyncio.sleep(poll)
        return "timed out waiting for a new master"
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    from mqcluster.common.config import load_properties

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-c", "--config", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    try:
        me = identity(load_properties(args.config))
        outcome = "not in controller mode" if me is None else asyncio.run(
            asyncio.wait_for(hand_over(me, args.timeout), args.timeout + 5)
        )
    except Exception as exc:
        outcome = f"hand-over failed: {exc}"
    print(f"preStop: {outcome}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
