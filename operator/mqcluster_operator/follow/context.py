"""What every step of a BrokerGroup's follower shares: the API, the reads, the clock, the
log, the facts of the round (``Round``) and the follower's memory of the status it wrote
(``StatusBook``: an index that lags behind has not seen those writes yet)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import conditions, names
from ..k8s import Api, Ref, differs
from ..models import BrokerGroupSpec
from ..views import Reads
from .election_plan import ControllerProbe, PodInfo
from .election_poller import Subscription
from .election_probes import ProbeTarget

Clock = Callable[[], str]
WRITE_MEMORY = 30.0  # how long an own status write may stay unseen by the index
OWN_RECORDS = ("migration", "scaling", "epochConflicts")  # status fields only followers write


class Log(Protocol):
    def info(self, msg: str, *args: object) -> None: ...


@dataclass
class StatusBook:
    """The status records and conditions this follower last wrote.

    Each part of a step (follow, migrate, upgrade) applies all the follower's
    conditions, so one computed from an index that lags behind would put back an
    entry another part just replaced; likewise, planning a step from an older record
    would repeat the step before it.
    """

    records: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def remembered(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """``status`` with the records and conditions this follower wrote."""
        out = {**status, **self.records}
        if self.conditions:
            out["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") not in self.conditions
            ] + list(self.conditions.values())
        return out

    def wrote(self, patch: Mapping[str, Any]) -> None:
        self.records.update({k: v for k, v in patch.items() if k in OWN_RECORDS})
        for cond in patch.get("conditions") or []:
            if cond.get("type") in conditions.FOLLOWER.types:
                self.conditions[cond["type"]] = dict(cond)


@dataclass
class Context:
    """The I/O the steps share; status writes go through ``write_status`` (remembered)."""

    api: Api
    reads: Reads
    clock: Clock
    log: Log
    book: StatusBook

    def remembered(self, status: Mapping[str, Any]) -> dict[str, Any]:
        return self.book.remembered(status)

    async def write_status(self, ref: Ref, patch: Mapping[str, Any],
                           fields_first: bool = False) -> None:
        await self.api.write_status(ref, patch, conditions.FOLLOWER, fields_first)
        self.book.wrote(patch)

    async def write_with_condition(
        self, ref: Ref, status: Mapping[str, Any], patch: dict[str, Any], kind: str,
        condition: tuple[bool | None, str, str] | None,
    ) -> None:
        """Writes ``patch`` and, when given and changed, the ``kind`` condition."""
        if condition is not None:
            conds = conditions.set_condition(status.get("conditions", []), kind, *condition,
                                             self.clock())
            if differs(conds, status.get("conditions")):
                patch["conditions"] = conds
        if patch:
            await self.write_status(ref, patch)


@dataclass(frozen=True)
class Round:
    """What one round read once for all its steps: the group, its pods, its election's
    subscription and where that election is read (``target``)."""

    body: Mapping[str, Any]
    ref: Ref
    spec: BrokerGroupSpec
    pods: list[PodInfo]
    revisions: dict[str, str]
    """The pods' ``controller-revision-hash`` labels, by name."""
    sub: Subscription
    target: ProbeTarget
    selector: dict[str, str]
    now: str
    """When the election was read (RFC 3339): the time its status and event carry."""

    @property
    def probe(self) -> ControllerProbe:
        return self.sub.probe


def merged(status: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(status)
    out.update(patch)
    return out


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch from ``old`` to ``new`` (keys gone become None)."""
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            out[key] = merge_patch(before, value)
        else:
            out[key] = value
    return out


def broker_addr(name: str, namespace: str, spec: BrokerGroupSpec, pod: str | int) -> str:
    """The remoting address of a BrokerGroup's pod (by name or ordinal)."""
    ordinal = pod if isinstance(pod, int) else int(pod.rsplit("-", 1)[1])
    return f"{names.pod_dns(name, ordinal, namespace)}:{spec.ports.listen}"


def running_mode(body: Mapping[str, Any], spec: BrokerGroupSpec) -> str:
    return str((body.get("status") or {}).get("appliedMode") or spec.mode)
