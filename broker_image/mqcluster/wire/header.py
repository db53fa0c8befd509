"""Request and response headers (a command's ``extFields``), for every process.

A header is a pydantic model whose fields are named as RocketMQ's Java header classes
name them on the wire (``camel_wire=True`` for models that keep snake_case attributes:
``master_broker_id`` <-> ``masterBrokerId``). Values travel as strings, as RocketMQ's
``CommandCustomHeader`` encoding does: integers in decimal, booleans as
``true``/``false``; ``None`` is left out. Decoding ignores fields it does not know (a
newer peer may send more), treats an empty value of a non-string field as absent, and
raises ``HeaderError`` naming each missing or malformed field; the RPC layer answers
that request with INVALID_REQUEST and keeps the connection.
"""

from __future__ import annotations

import typing
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from mqcluster.wire.frame import FrameError, RemotingCommand

H = TypeVar("H", bound="Header")


class HeaderError(FrameError):
    """A header that does not decode; the message names the field(s)."""


class Header(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    _non_str_fields: ClassVar[dict[type, frozenset[str]]] = {}

    def to_ext(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, value in self.model_dump(by_alias=True).items():
            if value is None:
                continue
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_ext(cls: type[H], ext: dict[str, str]) -> H:
        blanks = [k for k, v in ext.items() if v == "" and k in _non_str(cls)]
        if blanks:
            ext = {k: v for k, v in ext.items() if k not in blanks}
        try:
            return cls.model_validate(ext)
        except ValidationError as exc:
            problems = ", ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise HeaderError(f"bad {cls.__name__}: {problems}") from None

    @classmethod
    def from_command(cls: type[H], cmd: RemotingCommand) -> H:
        return cls.from_ext(cmd.ext_fields)


class CamelHeader(Header):
    """A header with snake_case attributes and RocketMQ's camelCase names on the wire."""

    model_config = ConfigDict(alias_generator=to_camel)


def _non_str(cls: type[Header]) -> frozenset[str]:
    """Wire names of the fields whose type is not ``str`` (cached per class)."""
    cached = Header._non_str_fields.get(cls)
    if cached is None:
        names = set()
        for name, field in cls.model_fields.items():
            args = typing.get_args(field.annotation) or (field.annotation,)
            if str not in args:
                names.add(field.alias or name)
        cached = Header._non_str_fields[cls] = frozenset(names)
    return cached

