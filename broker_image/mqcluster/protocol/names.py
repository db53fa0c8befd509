"""The rules for names (topics, groups, tags, keys, message groups, property keys and
values), as RocketMQ's validators apply them. The gRPC endpoint, the remoting handlers
and the remoting codec all use these functions, so a name one protocol refuses the
other refuses too. Each returns ``None`` for a good value, else a sentence saying what
is wrong.
"""

from __future__ import annotations

import functools
import re

from mqcluster.protocol.properties import KEY_SEPARATOR

MAX_TOPIC_LENGTH = 127
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
GROUP_MAX_LENGTH = 255
# Java's Character.isISOControl, as RocketMQ's proxy validators use it. The property
# separators \x01 and \x02 are among them: a value holding one would be read back as
# other properties (injected KEYS, a message group, ...).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A remoting properties string: only its own separators may be control characters.
_CONTROL_IN_PROPERTIES = re.compile(r"[\x00\x03-\x1f\x7f-\x9f]")


def _control(value: str) -> str | None:
    m = _CONTROL.search(value)
    return None if m is None else f"contains the control character {m.group()!r}"


def topic_name_problem(topic: str) -> str | None:
    if not topic:
        return "topic name is empty"
    if len(topic) > MAX_TOPIC_LENGTH:
        return f"topic name is {len(topic)} characters, longer than {MAX_TOPIC_LENGTH}"
    return _pattern_problem(topic, "topic")


def group_name_problem(group: str, what: str = "consumer group") -> str | None:
    if not group:
        return f"{what} name is empty"
    if len(group) > GROUP_MAX_LENGTH:
        return f"{what} name is {len(group)} characters, longer than {GROUP_MAX_LENGTH}"
    return _pattern_problem(group, what)


@functools.lru_cache(maxsize=4096)  # (every send and pull checks its names; short ones only)
def _pattern_problem(name: str, what: str) -> str | None:
    if TOPIC_PATTERN.fullmatch(name):
        return None
    return f"{what} name {name!r} may contain only letters, digits, '%', '|', '_' and '-'"


def tag_problem(tag: str) -> str | None:
    # (Every remoting send checks its tag: the few short ones in use are remembered.)
    return _cached_tag_problem(tag) if len(tag) <= 128 else _tag_problem(tag)


def _tag_problem(tag: str) -> str | None:
    if not tag.strip():
        return "tag is blank"
    if "|" in tag:
        return f"tag {tag[:200]!r} contains '|' (it separates tags in a subscription)"
    bad = _control(tag)
    return None if bad is None else f"tag {tag[:200]!r} {bad}"


_cached_tag_problem = functools.lru_cache(maxsize=4096)(_tag_problem)


def key_problem(key: str) -> str | None:
    if not key.strip():
        return "message key is blank"
    if KEY_SEPARATOR in key:
        return f"message key {key[:200]!r} contains a space (it separates keys)"
    bad = _control(key)
    return None if bad is None else f"message key {key[:200]!r} {bad}"


def message_group_problem(group: str, max_length: int) -> str | None:
    if not group.strip() or len(group) > max_length:
        return f"message group must be 1..{max_length} characters, not blank"
    bad = _control(group)
    return None if bad is None else f"message group {group[:200]!r} {bad}"


def property_problem(key: str, value: str) -> str | None:
    """A property's name and value, as the properties string carries them."""
    if not key.strip():
        return "property key is blank"
    bad = _control(key)
    if bad is not None:
        return f"property key {key[:200]!r} {bad}"
    bad = _control(value)
    return None if bad is None else f"value of property {key[:200]!r} {bad}"


def properties_text_problem(text: str) -> str | None:
    """A remoting ``name\\x01value\\x02`` string: no control character but its separators."""
    m = _CONTROL_IN_PROPERTIES.search(text)
    return None if m is None else f"properties contain the control character {m.group()!r}"
