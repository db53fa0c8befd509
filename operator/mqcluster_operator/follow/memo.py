"""What a BrokerGroup's follower remembers between rounds, one typed part per concern.

The follower is the only writer of the status records and conditions it keeps here, so
while it lives its memory is newer than an index that has not yet seen its writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from .context import StatusBook
from .epochs import EpochsMemo
from .following import FollowingMemo
from .runtime_config import RuntimeConfigMemo
from .upgrade import UpgradeMemo


@dataclass
class FollowerMemo:
    status: StatusBook = field(default_factory=StatusBook)
    following: FollowingMemo = field(default_factory=FollowingMemo)
    epochs: EpochsMemo = field(default_factory=EpochsMemo)
    upgrade: UpgradeMemo = field(default_factory=UpgradeMemo)
    runtime_config: RuntimeConfigMemo = field(default_factory=RuntimeConfigMemo)
