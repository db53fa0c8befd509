"""RocketMQ-style ``key=value`` properties files, parsed into pydantic models.

Models name their fields exactly as RocketMQ's keys (``brokerClusterName``,
``listenPort``...). Careless configuration stops the process with a
ConfigError naming the key (and its line, when it came from a file):

- a bad value;
- a key that is neither the model's nor RocketMQ's (a typo or a stale name),
  with the closest known key suggested: a misspelt ``allAckInSyncStateSet``
  must not silently leave a durability setting at its default;
- a key set twice in one file (Java would take the last one without a word);
- an empty name (``brokerName=``), which would otherwise fall back to a default.

A RocketMQ key the model does not implement (``rocketmq_keys``) is a warning:
real files carry keys for features a deployment does not use. Any other empty
value means "unset", as RocketMQ prints unset keys that way.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from annotated_types import MinLen
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.fields import FieldInfo

from mqcluster.common import rocketmq_keys

log = logging.getLogger(__name__)

M = TypeVar("M", bound="RocketConfig")

NAME_KEYS: frozenset[str] = frozenset({
    "brokerClusterName", "brokerName", "dLegerGroup", "dLegerSelfId",
    "controllerDLegerGroup", "controllerDLegerSelfId", "storePathRootDir",
})
"""Keys whose empty value is an error, whatever the model's default: a name given as
nothing is a mistake, not a request for the default (the host name, ``n0``...).
Fields declared with ``min_length`` count too."""

SUGGESTION_CUTOFF = 0.8
"""difflib similarity below which no key is suggested (a guess would mislead)."""


class ConfigError(ValueError):
    """Invalid configuration; the message names the offending key."""


class RocketConfig(BaseModel):
    """Base for process configurations: strict types, keys as RocketMQ spells them."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True, populate_by_name=True)


class Properties(dict[str, str]):
    """Keys and values of a properties file; ``lines`` has the line each key is on
    (keys set elsewhere, e.g. on the command line, have none)."""

    def __init__(self, values: Mapping[str, str] | None = None,
                 lines: Mapping[str, int] | None = None) -> None:
        super().__init__(values or {})
        self.lines: dict[str, int] = dict(lines or {})

    def __setitem__(self, key: str, value: str) -> None:
        # a value set after parsing (a command-line option) is not on the file's line
        super().__setitem__(key, value)
        self.lines.pop(key, None)

    def subset(self, keys: Iterable[str]) -> Properties:
        """The given keys (those present), with their lines."""
        kept = [k for k in keys if k in self]
        return Properties({k: self[k] for k in kept},
                          {k: self.lines[k] for k in kept if k in self.lines})


def parse_properties(text: str, source: str = "<config>") -> Properties:
    """Parse Java-properties-style text: ``key=value`` or ``key: value``, ``#``/``!`` comments.

    A key given twice is an error naming it and both lines."""
    props = Properties()
    seen: dict[str, list[int]] = {}
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
        seen.setdefault(key, []).append(lineno)
        props[key] = value
        props.lines[key] = seen[key][0]
    repeated = [
        f"key {key!r} is set more than once (lines {', '.join(map(str, lines))}): keep one"
        for key, lines in seen.items() if len(lines) > 1
    ]
    if repeated:
        raise ConfigError(f"{source}: " + "; ".join(repeated))
    return props


def load_properties(path: str | Path) -> Properties:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {p} is not UTF-8 text: {exc.reason} at byte "
                          f"{exc.start}") from None
    return parse_properties(text, str(p))


def closest_key(key: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``key`` was most likely meant to be, or None when none is close.

    Case is ignored for the comparison (``brokername`` -> ``brokerName``)."""
    by_lower: dict[str, str] = {}
    for candidate in candidates:
        by_lower.setdefault(candidate.lower(), candidate)
    found = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=SUGGESTION_CUTOFF)
    return by_lower[found[0]] if found else None


def unknown_key_message(key: str, candidates: Iterable[str], where: str = "") -> str:
    """``unknown key 'x' on line 3: did you mean 'y'?`` (the suggestion when there is one)."""
    guess = closest_key(key, candidates)
    hint = f": did you mean {guess!r}?" if guess else ""
    return f"unknown key {key!r}{where}{hint}"


def needs_value(key: str, field: FieldInfo) -> bool:
    """Whether an empty value for ``key`` is an error rather than "unset"."""
    return key in NAME_KEYS or any(
        isinstance(m, MinLen) and m.min_length > 0 for m in field.metadata)


def build_config(model: type[M], props: Mapping[str, Any], source: str = "<config>") -> M:
    """Validate ``props`` into ``model``; the error names every bad key (and its line)."""
    fields = model.model_fields
    lines = props.lines if isinstance(props, Properties) else {}

    def where(key: str) -> str:
        return f" on line {lines[key]}" if key in lines else ""

    problems: list[str] = []
    values: dict[str, Any] = {}
    for key, value in props.items():
        if key not in fields:
            classes = rocketmq_keys.classes_of(key)
            if classes:
                log.warning("%s: RocketMQ key %r%s (%s) is not implemented here: ignored",
                            source, key, where(key), ", ".join(classes))
            else:
                problems.append(
                    unknown_key_message(key, [*fields, *rocketmq_keys.ALL], where(key)))
        elif value == "":
            if needs_value(key, fields[key]):
                problems.append(f"key {key!r}{where(key)} is empty: give it a value "
                                f"or remove the line")
        else:
            values[key] = value
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"]) or "<config>"
            given = props.get(key, "")
            problems.append(f"invalid value for key {key!r} ({given!r}){where(key)}: "
                            f"{err['msg']}")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def load_config(
    model: type[M], path: str | Path | None, overrides: Mapping[str, str] | None = None
) -> M:
    """Load ``path`` (if given), apply ``overrides`` (e.g. from the command line), validate."""
    props = load_properties(path) if path else Properties()
    for key, value in (overrides or {}).items():
        props[key] = value
    return build_config(model, props, str(path or "<command line>"))
