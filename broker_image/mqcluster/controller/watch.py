"""The controller's side of WATCH_MASTERS (``mqcluster.protocol.controller_watch``): every
group's master as the replicated state has it, and whether a caller's view is out of date.
"""

from __future__ import annotations

from collections.abc import Mapping

from mqcluster.controller.statemachine import ControllerState
from mqcluster.protocol.controller_watch import GroupMaster

MAX_WATCHERS = 256


def masters_of(state: ControllerState) -> dict[str, GroupMaster]:
    out = {}
    for name, info in state.replica_info_table.items():
        sync = state.sync_state(name)
        master = info.address_of(sync.master_broker_id) if sync else None
        out[name] = GroupMaster(master, sync.master_epoch if sync else 0,
                                tuple(sorted(b.address for b in info.brokers.values())))
    return out


def differs(known: Mapping[str, int], now: Mapping[str, GroupMaster]) -> bool:
    """Whether the caller's view is out of date."""
    return set(known) != set(now) or any(known[g] != m.master_epoch for g, m in now.items())
