"""Request and response headers (a command's ``extFields``), for every process.

A header is a :class:`msgspec.Struct` whose fields are named as RocketMQ's Java header
classes name them on the wire (:class:`CamelHeader` for headers that keep snake_case
attributes: ``master_broker_id`` <-> ``masterBrokerId``). Fields are keyword-only, so a
required field may follow one with a default; constraints are ``Annotated[int,
msgspec.Meta(ge=0)]``. Values travel as strings, as RocketMQ's ``CommandCustomHeader``
encoding does: integers in decimal, booleans as ``true``/``false``; ``None`` is left
out. Decoding (:meth:`Header.from_ext`) ignores fields it does not know (a newer peer
may send more), treats an empty value of a non-string field as absent, and raises
``HeaderError`` naming each missing or malformed field; the RPC layer answers that
request with INVALID_REQUEST and keeps the connection.

Only decoding checks types and constraints: building a header by keyword does not (the
type checker does), so whatever comes from a peer goes through ``from_ext``.
"""

from __future__ import annotations

import functools
import re
import types
import typing
from typing import Any, Self, TypeVar, dataclass_transform

import msgspec

from mqcluster.wire.frame import FrameError, RemotingCommand


class HeaderError(FrameError):
    """A header that does not decode; the message names the field(s)."""


class _HeaderMeta(msgspec.StructMeta):
    """Makes every header keyword-only without each subclass saying so (RocketMQ's field
    order puts required fields after defaulted ones)."""

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **config: Any
    ) -> _HeaderMeta:
        config.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **config)


@dataclass_transform(kw_only_default=True, field_specifiers=(msgspec.field,))
class Header(msgspec.Struct, metaclass=_HeaderMeta):
    """Base of every header; subclasses declare the fields, named as on the wire."""

    def to_ext(self) -> dict[str, str]:
        """The fields as ``extFields``: wire names, string values, ``None`` left out."""
        out: dict[str, str] = {}
        for name, wire in _names(type(self)):
            value = getattr(self, name)
            if value is not None:
                out[wire] = (value if type(value) is str
                             else ("true" if value else "false") if type(value) is bool
                             else str(value))
        return out

    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self:
        """Decode ``extFields``; raises HeaderError naming every missing or bad field."""
        try:
            return msgspec.convert(ext, cls, strict=False)
        except msgspec.ValidationError as exc:
            error = exc
        # An empty value of a non-string field means absent; such a value never converts
        # (to an int or a bool), so the attempt above fails whenever there is one.
        non_str = _non_str(cls)
        blanks = [k for k, v in ext.items() if v == "" and k in non_str]
        if blanks:
            ext = {k: v for k, v in ext.items() if k not in blanks}
            try:
                return msgspec.convert(ext, cls, strict=False)
            except msgspec.ValidationError as exc:
                error = exc
        raise HeaderError(_problems(cls, ext, error)) from None

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        return cls.from_ext(cmd.ext_fields)


@functools.cache
def _names(cls: type[Header]) -> tuple[tuple[str, str], ...]:
    """(attribute, wire name) of each field."""
    return tuple(zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True))


H = TypeVar("H", bound=Header)


def renamed(cls: type[H], name: str, wire_names: dict[str, str], doc: str) -> type[H]:
    """A subclass of ``cls`` with the same fields under other wire names (attribute ->
    wire name), decoded straight from them. (msgspec renames only the fields a class
    declares itself, so the subclass declares them all again.)"""
    namespace: dict[str, Any] = {
        "__module__": cls.__module__,
        "__doc__": doc,
        "__annotations__": dict(cls.__annotations__),
    }
    for f in msgspec.structs.fields(cls):
        if f.default is not msgspec.NODEFAULT:
            namespace[f.name] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            namespace[f.name] = msgspec.field(default_factory=f.default_factory)
    sub: type[H] = _HeaderMeta(name, (cls,), namespace, rename=wire_names)  # type: ignore[assignment]
    return sub


class CamelHeader(Header, rename="camel"):
    """A header with snake_case attributes and RocketMQ's camelCase names on the wire."""


class _Field(typing.NamedTuple):
    wire: str
    required: bool
    type: Any
    """The field's type without ``| None``: the wire never carries a null."""
    is_str: bool
    """The type admits ``str``: an empty value is a value, not an absent field."""


@functools.cache
def _fields(cls: type[Header]) -> tuple[_Field, ...]:
    """The fields of ``cls`` as decoding needs them."""
    return tuple(
        _Field(f.encode_name, f.required, _without_none(f.type), str in _members(f.type))
        for f in msgspec.structs.fields(cls)
    )


@functools.cache
def _non_str(cls: type[Header]) -> frozenset[str]:
    """Wire names of the fields whose type does not admit ``str``."""
    return frozenset(f.wire for f in _fields(cls) if not f.is_str)


def _members(tp: Any) -> tuple[Any, ...]:
    """The types a field admits: ``Annotated`` unwrapped, a union split."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return tuple(m for arg in typing.get_args(tp) for m in _members(arg))
    return (tp,)


def _without_none(tp: Any) -> Any:
    """``X | None`` -> ``X``: the wire never carries a null, so name the type it should be."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


_AT_PATH = re.compile(r" - at `\$[^`]*`$")
_GOT_TYPE = re.compile(r", got `[^`]*`$")


SHOWN_CHARS = 80


def _shown(raw: str) -> str:
    """A peer's value as an error quotes it: a long one is cut (a 1 MB name would come
    back in full in the answer's remark and in the log)."""
    if len(raw) <= SHOWN_CHARS:
        return repr(raw)
    return f"{raw[:SHOWN_CHARS]!r}... ({len(raw)} characters)"


def _problems(cls: type[Header], ext: dict[str, str], exc: msgspec.ValidationError) -> str:
    """``bad Cls: queueId: expected int, got 'three'; masterEpoch: missing`` (every field).

    msgspec stops at the first error, so each field is checked on its own here; this is
    the cold path of a request that is answered INVALID_REQUEST."""
    problems: list[str] = []
    for f in _fields(cls):
        if f.wire not in ext:
            if f.required:
                problems.append(f"{f.wire}: missing")
            continue
        raw = ext[f.wire]
        try:
            msgspec.convert(raw, f.type, strict=False)
        except msgspec.ValidationError as err:
            what = _GOT_TYPE.sub("", _AT_PATH.sub("", str(err))).replace("`", "")
            if what.startswith("Expected"):
                what = "e" + what[1:]
            problems.append(f"{f.wire}: {what}, got {_shown(raw)}")
    if not problems:  # not a single field's fault (should not happen): msgspec's words
        problems.append(str(exc))
    return f"bad {cls.__name__}: " + "; ".join(problems)
