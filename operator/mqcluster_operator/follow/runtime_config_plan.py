"""Broker config keys applied without a restart: what to push to the running brokers."""

from __future__ import annotations

from collections.abc import Mapping


def runtime_changes(
    desired: Mapping[str, str], applied: Mapping[str, str] | None,
) -> dict[str, str] | None:
    """The keys to push with ``updateBrokerConfig``: None when nothing is to be done or
    written; {} when only the record is missing (the pods started with ``desired``).
    A key removed from the spec goes back to its value in the (regenerated) ConfigMap
    only at the next restart, so it is not pushed."""
    if applied is None:
        return {}
    changes = {k: v for k, v in desired.items() if applied.get(k) != v}
    if not changes and set(applied) == set(desired):
        return None
    return changes
