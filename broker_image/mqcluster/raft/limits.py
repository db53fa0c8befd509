"""Limits of every number and name the Raft protocol and its files carry.

DLedger keeps terms and indexes in Java ``long``s: a value past a signed 64-bit
integer is not a term any member could have reached, and our log records keep
them in 8 bytes. None of them is ever negative. A value out of range is the
sender's fault (or an older version's file), never something to adopt.
"""

from __future__ import annotations

import math
import re

from mqcluster.common.javaints import INT64_MAX
from mqcluster.common.show import show

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_LONG",
    "MAX_TERM",
    "LimitError",
    "check_id",
    "check_long",
    "parse_bool",
    "parse_finite_float",
    "parse_long",
    "show",
]

MAX_LONG = INT64_MAX
MAX_TERM = MAX_LONG  # a member at this term stays there (see RaftNode._next_term)
MAX_ID_LENGTH = 128

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")  # what str(int) writes; at most 19 digits
_ID = re.compile(r"[!-~]+")  # printable ASCII without spaces, as in ``n0-host:port`` peers


class LimitError(ValueError):
    """A value is not of its type or out of its range; the message names the field."""


def parse_long(raw: str, what: str) -> int:
    """A non-negative decimal ``long`` written as ``str(int)`` writes it, nothing looser
    (no sign, spaces, underscores or leading zeros)."""
    if not _DECIMAL.fullmatch(raw):
        raise LimitError(f"{what}: {show(raw)} is not a non-negative decimal integer")
    return check_long(int(raw), what)


def check_long(value: object, what: str) -> int:
    """``value`` itself if it is an int (not a bool) in 0..MAX_LONG."""
    if type(value) is not int:
        raise LimitError(f"{what}: {show(value)} is not an integer")
    if not 0 <= value <= MAX_LONG:
        raise LimitError(f"{what}: {value} is out of range 0..{MAX_LONG}")
    return value


def check_id(value: object, what: str) -> str:
    """A member id: 1..MAX_ID_LENGTH printable ASCII characters, no spaces."""
    if type(value) is not str:
        raise LimitError(f"{what}: {show(value)} is not a member id")
    if len(value) > MAX_ID_LENGTH or not _ID.fullmatch(value):
        raise LimitError(f"{what}: {show(value)} is not a member id "
                         f"(1-{MAX_ID_LENGTH} printable characters, no spaces)")
    return value


def parse_bool(raw: str, what: str) -> bool:
    if raw == "True":
        return True
    if raw == "False":
        return False
    raise LimitError(f"{what}: {show(raw)} is not True or False")


def parse_finite_float(raw: str, what: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise LimitError(f"{what}: {show(raw)} is not a number") from None
    if not math.isfinite(value):
        raise LimitError(f"{what}: {show(raw)} is not a finite number")
    return value
