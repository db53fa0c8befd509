"""What a client carries back names the group it came from, so any proxy replica
(or this one after a restart) sends the follow-up call to the right group.

- Receipt handles already name it: the broker writes its group into every handle
  (``1~topic~queue~offset~popTime~invisibleMs~epoch~broker~crc``, CRC-checked), so
  they pass through the proxy unchanged and stay valid on direct connections.
- Transaction ids and recall handles do not: the proxy wraps them as
  ``mqp1:<length of the group>:<group><the broker's token>`` and unwraps them on the
  way back (EndTransaction, RecallMessage, transaction check-backs).
"""

from __future__ import annotations

import zlib

PREFIX = "mqp1:"
_RECEIPT_SEP = "~"
_RECEIPT_FIELDS = 9


class TokenError(ValueError):
    """A token the proxy cannot tell the group of (the message says why)."""


def wrap(group: str, token: str) -> str:
    """``token`` tagged with ``group``; an empty token stays empty (nothing to route)."""
    return f"{PREFIX}{len(group)}:{group}{token}" if token else token


def unwrap(text: str, what: str = "token") -> tuple[str, str]:
    """(group, the broker's token) of a wrapped ``text``."""
    if not text.startswith(PREFIX):
        raise TokenError(f"{what} was not issued by a proxy (no {PREFIX!r} prefix)")
    length, sep, rest = text[len(PREFIX):].partition(":")
    if not sep or not length.isdigit() or not 0 < int(length) <= len(rest):
        raise TokenError(f"{what} is malformed (bad group length)")
    n = int(length)
    group, inner = rest[:n], rest[n:]
    if not inner:
        raise TokenError(f"{what} is malformed (nothing after the group)")
    return group, inner


def receipt_group(handle: str) -> str:
    """The group a receipt handle was issued by; TokenError if it is not a valid handle."""
    body, sep, crc = handle.rpartition(_RECEIPT_SEP)
    try:
        valid = bool(sep) and int(crc, 16) == zlib.crc32(body.encode())
    except ValueError:
        valid = False
    if not valid:
        raise TokenError("receipt handle is corrupted")
    parts = body.split(_RECEIPT_SEP)
    if len(parts) < _RECEIPT_FIELDS - 1 or parts[0] != "1":
        raise TokenError("unknown receipt handle format")
    group = _RECEIPT_SEP.join(parts[7:])
    if not group:
        raise TokenError("receipt handle names no broker group")
    return group
