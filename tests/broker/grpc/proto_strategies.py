"""Hypothesis strategies for any protobuf message, built from its descriptor: every
field set or not, integers over their whole type range, enums with undefined numbers,
strings with control characters and the property separators."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

F = FieldDescriptor

NAMES = st.sampled_from(["T", "T2", "G", "%RETRY%G", "rmq_sys_wheel_timer", "a" * 300, ""])
TEXT = st.one_of(
    NAMES,
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    st.text("ab \x00\x01\x02\n\x7f|%", max_size=6),
)
_INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1), F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1), F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1), F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1), F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1), F.TYPE_FIXED64: (0, 2**64 - 1),
}
_SMALL = st.integers(-3, 70)


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t in _INTS:
        lo, hi = _INTS[t]
        small = _SMALL.filter(lambda v: lo <= v <= hi)
        return st.one_of(small, st.integers(lo, hi), st.sampled_from([lo, hi]))
    if t == F.TYPE_BOOL:
        return st.booleans()
    if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return st.floats(allow_nan=True, width=32 if t == F.TYPE_FLOAT else 64)
    if t == F.TYPE_STRING:
        return TEXT
    if t == F.TYPE_BYTES:
        return st.binary(max_size=24)
    if t == F.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(numbers), st.integers(-2, 40))
    raise AssertionError(f"no strategy for field type {t}")


@st.composite
def _fill(draw: st.DrawFn, descriptor: Descriptor, cls: type[Message], depth: int) -> Message:
    msg = cls()
    for field in descriptor.fields:
        if not draw(st.booleans()):
            continue
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if is_map:
            key_f = field.message_type.fields_by_name["key"]
            value_f = field.message_type.fields_by_name["value"]
            if value_f.type == F.TYPE_MESSAGE:
                continue
            entries = draw(st.dictionaries(_scalar(key_f), _scalar(value_f), max_size=3))
            getattr(msg, field.name).update(entries)
        elif field.type == F.TYPE_MESSAGE:
            if depth <= 0:
                continue
            sub_cls = type(getattr(msg, field.name)) if not _repeated(field) else None
            if _repeated(field):
                container = getattr(msg, field.name)
                for _ in range(draw(st.integers(0, 2))):
                    item = container.add()
                    item.CopyFrom(draw(_fill(field.message_type, type(item), depth - 1)))
            else:
                assert sub_cls is not None
                getattr(msg, field.name).CopyFrom(
                    draw(_fill(field.message_type, sub_cls, depth - 1)))
        elif _repeated(field):
            getattr(msg, field.name).extend(draw(st.lists(_scalar(field), max_size=3)))
        else:
            setattr(msg, field.name, draw(_scalar(field)))
    return msg


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def messages_of(cls: type[Message], depth: int = 4) -> st.SearchStrategy[Message]:
    """Arbitrary instances of ``cls`` (nested messages down to ``depth``)."""
    return _fill(cls.DESCRIPTOR, cls, depth)
