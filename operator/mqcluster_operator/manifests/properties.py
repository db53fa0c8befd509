"""RocketMQ ``key=value`` properties text."""

from __future__ import annotations

from collections.abc import Mapping

Props = dict[str, str]


def render(props: Mapping[str, str], header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines.extend(f"{key}={value}" for key, value in props.items())
    return "\n".join(lines) + "\n"


def flag(value: bool) -> str:
    return "true" if value else "false"
