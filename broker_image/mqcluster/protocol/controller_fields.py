"""Limits of the controller protocol's fields, and the header base that enforces them.

As RocketMQ's Java types have them: broker ids, offsets and times are ``long``s,
epochs and priorities ``int``s; none of them is negative. Names and addresses are
bounded and free of control characters and spaces (they end up in logs, the
replicated state and JSON answers).
"""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Annotated, Any, Self

import msgspec

from mqcluster.common.javaints import INT32_MAX, INT64_MAX
from mqcluster.common.show import show
from mqcluster.wire.header import CamelHeader, HeaderError


class ProtocolError(ValueError):
    """A header or body does not match the protocol; the message names the field."""


NAME_MAX = 255
MAX_MEMBERS = 1024  # broker ids in one SyncStateSet

BrokerId = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Offset = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Millis = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Epoch = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
Priority = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
Term = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=NAME_MAX,
                                   pattern=r"^[^\x00-\x20\x7f]+\Z")]
Address = Name
"""``host:port``; checked as a name (the address itself is checked where it is dialled)."""
Text = Annotated[str, msgspec.Meta(max_length=4 * NAME_MAX)]
Peers = Annotated[str, msgspec.Meta(max_length=64 * NAME_MAX)]
CheckCode = Annotated[str, msgspec.Meta(min_length=1, max_length=2 * NAME_MAX,
                                        pattern=r"^[!-~]+\Z")]
"""``brokerAddress;code``, as RocketMQ's registerCheckCode."""

_NAME_RE = re.compile(r"[^\x00-\x20\x7f]{1,%d}" % NAME_MAX)  # noqa: UP031
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,18})")


def check_name(value: object, what: str) -> str:
    """A cluster or broker name as the headers allow it."""
    if type(value) is not str or not _NAME_RE.fullmatch(value):
        raise ProtocolError(f"{what} must be 1-{NAME_MAX} characters without spaces or "
                            f"control characters, got {show(value)}")
    return value


@functools.cache
def _strict_fields(cls: type[CamelHeader]) -> tuple[tuple[str, type], ...]:
    """(wire name, int or bool) of each field whose value must be written exactly so."""
    out: list[tuple[str, type]] = []
    for f in msgspec.structs.fields(cls):
        kinds = _kinds(f.type)
        for kind in (bool, int):
            if kind in kinds:
                out.append((f.encode_name, kind))
                break
    return tuple(out)


def _kinds(tp: Any) -> set[Any]:
    if typing.get_origin(tp) is Annotated:
        return _kinds(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return {k for arg in typing.get_args(tp) for k in _kinds(arg)}
    return {tp}


class ControllerHeader(CamelHeader):
    """A controller header: on top of the header codec's checks, an integer is written in
    decimal digits only (as Java's ``Long.parseLong`` reads it: no ``1.0`` or ``1e3``)
    and a boolean as ``true``/``false``, and every field keeps to its limits above."""

    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self:
        for wire, kind in _strict_fields(cls):
            raw = ext.get(wire)
            if raw is None or raw == "":
                continue
            if type(raw) is not str:
                raise HeaderError(f"bad {cls.__name__}: {wire}: expected a string")
            if kind is int and not _DECIMAL.fullmatch(raw):
                raise HeaderError(f"bad {cls.__name__}: {wire}: expected an integer, "
                                  f"got {show(raw)}")
            if kind is bool and raw.lower() not in ("true", "false"):
                raise HeaderError(f"bad {cls.__name__}: {wire}: expected true or false, "
                                  f"got {show(raw)}")
        return super().from_ext(ext)



def check_decimal(raw: str) -> bool:
    """Whether ``raw`` is an integer as Java's ``Long.parseLong`` writes it."""
    return _DECIMAL.fullmatch(raw) is not None
