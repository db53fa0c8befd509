"""RocketMQ-style ``key=value`` properties files, parsed into pydantic models.

Models name their fields exactly as RocketMQ's keys (``brokerClusterName``,
``listenPort``...). A bad value fails with a ConfigError naming the key;
unknown keys are reported as warnings, because RocketMQ ignores them too and
real configuration files carry keys for features a deployment does not use.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

log = logging.getLogger(__name__)

M = TypeVar("M", bound="RocketConfig")


class ConfigError(ValueError):
    """Invalid configuration; the message names the offending key."""


class RocketConfig(BaseModel):
    """Base for process configurations: strict types, keys as RocketMQ spells them."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True, populate_by_name=True)


def parse_properties(text: str, source: str = "<config>") -> dict[str, str]:
    """Parse Java-properties-style text: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not seps:
            raise ConfigError(f"{source}:{lineno}: expected key=value, got {line!r}")
        cut = min(seps)
        key, value = line[:cut].strip(), line[cut + 1 :].strip()
        if not key:
            raise ConfigError(f"{source}:{lineno}: empty key")
        props[key] = value
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from exc
    return parse_properties(text, str(p))


def build_config(model: type[M], props: dict[str, Any], source: str = "<config>") -> M:
    """Validate ``props`` into ``model``; the error names every bad key."""
    known = set(model.model_fields)
    for key in props:
        if key not in known:
            log.warning("%s: unknown config key %r ignored", source, key)
    values = {k: (None if v == "" else v) for k, v in props.items() if k in known}
    values = {k: v for k, v in values.items() if v is not None}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "<config>"
            given = props.get(key, "")
            problems.append(f"invalid value for key {key!r} ({given!r}): {err['msg']}")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def load_config(
    model: type[M], path: str | Path | None, overrides: dict[str, str] | None = None
) -> M:
    """Load ``path`` (if given), apply ``overrides`` (e.g. from the command line), validate."""
    props = load_properties(path) if path else {}
    props.update(overrides or {})
    return build_config(model, props, str(path or "<command line>"))
