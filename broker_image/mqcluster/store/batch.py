"""Vectorized batch append: many messages of one queue, encoded straight into one buffer.

A ``RawBatch`` carries what a producer's batch request holds, already in the stored
form (each message's properties string as bytes, its tag hash); appending it makes
one record per message (one CRC each) without a per-message record object.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from mqcluster.common.crc import crc32
from mqcluster.store.codec import (
    CRC_PREFIX,
    FIXED_SIZE,
    I16,
    I32,
    MESSAGE_MAGIC,
    TAIL_FIXED,
    consumes_queue_offset,
    short_field,
    topic_field,
)
from mqcluster.store.message import PutStatus
from mqcluster.store.validation import MAX_PROPERTIES_LENGTH, topic_problem


@dataclass(slots=True)
class RawBatch:
    """Messages for one queue from one request; lists are parallel, one item per message.

    ``properties[i]`` is the stored properties string (``name\\x01value\\x02...``, UTF-8)
    including TAGS, KEYS and UNIQ_KEY; ``tags_codes[i]`` the hash of its TAGS value.
    Transactional ``sys_flag`` values are not accepted here (use ``put_messages``).
    """

    topic: str
    queue_id: int
    born_host: str
    born_timestamp: int
    bodies: list[bytes]
    properties: list[bytes]
    tags_codes: list[int]
    flags: list[int]
    sys_flag: int = 0
    reconsume_times: int = 0

    def with_properties(self, properties: list[bytes]) -> RawBatch:
        """This batch with other properties strings (``dataclasses.replace`` looks the
        fields up on every call: this is on the send path)."""
        return RawBatch(self.topic, self.queue_id, self.born_host, self.born_timestamp,
                        self.bodies, properties, self.tags_codes, self.flags, self.sys_flag,
                        self.reconsume_times)


@dataclass(slots=True)
class BatchPutResult:
    """Message ``i`` got queue offset ``queue_offset + i`` and ``commitlog_offsets[i]``."""

    status: PutStatus
    queue_offset: int = -1
    commitlog_offsets: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    store_timestamp: int = 0
    remark: str = ""

    @property
    def next_commitlog_offset(self) -> int:
        if not self.commitlog_offsets:
            return -1
        return self.commitlog_offsets[-1] + self.sizes[-1]


@dataclass(slots=True)
class EncodedBatch:
    """The parts of a batch's records that do not depend on their position."""

    batch: RawBatch
    hosts: bytes
    topic_field: bytes
    sizes: list[int]


@functools.lru_cache(maxsize=4096)
def _checked_topic(topic: str) -> tuple[bytes, str | None]:
    """A topic's stored field and what is wrong with its name (None: nothing): the
    same few topics arrive in every request."""
    return topic_field(topic), topic_problem(topic, len(topic.encode("utf-8")))


@functools.lru_cache(maxsize=4096)
def _host_fields(born_host: str, store_host: str) -> bytes | None:
    """Both host fields as stored, or None when one is longer than 255 bytes."""
    born, store = short_field(born_host), short_field(store_host)
    if len(born) > 256 or len(store) > 256:
        return None
    return born + store


def check_batch(
    batch: RawBatch, store_host: str, max_body: int, max_props: int, segment_size: int
) -> tuple[EncodedBatch | None, tuple[PutStatus, str] | None]:
    """The encoded batch, or the status and reason it must be refused (all or nothing)."""
    topic, problem = _checked_topic(batch.topic)
    if problem is not None:
        return None, (PutStatus.MESSAGE_ILLEGAL, problem)
    if batch.queue_id < 0:
        return None, (PutStatus.MESSAGE_ILLEGAL, "negative queue id")
    if not consumes_queue_offset(batch.sys_flag):
        return None, (PutStatus.MESSAGE_ILLEGAL, "transactional messages cannot be batched")
    hosts = _host_fields(batch.born_host, store_host)
    if hosts is None:
        return None, (PutStatus.MESSAGE_ILLEGAL, "host string longer than 255 bytes")
    n = len(batch.bodies)
    if not n or not len(batch.properties) == len(batch.tags_codes) == len(batch.flags) == n:
        return None, (PutStatus.MESSAGE_ILLEGAL, "batch lists are empty or differ in length")
    props_limit = min(max_props, MAX_PROPERTIES_LENGTH)
    fixed = FIXED_SIZE + len(hosts) + 4 + len(topic) + 2
    sizes = []
    for body, props in zip(batch.bodies, batch.properties, strict=True):
        if len(props) > props_limit:
            return None, (PutStatus.PROPERTIES_SIZE_EXCEEDED, f"properties are {len(props)} bytes")
        if len(body) > max_body:
            return None, (
                PutStatus.MESSAGE_ILLEGAL,
                f"body of {len(body)} bytes exceeds maxMessageSize {max_body}",
            )
        size = fixed + len(body) + len(props)
        if size + 8 > segment_size:
            return None, (PutStatus.MESSAGE_ILLEGAL, "message larger than a commitlog segment")
        sizes.append(size)
    return EncodedBatch(batch, hosts, topic, sizes), None


def encode_records(
    enc: EncodedBatch, start: int, stop: int, first_queue_offset: int,
    physical_offsets: list[int], store_timestamp: int,
) -> list[bytes]:
    """Records ``start..stop-1`` of the batch at ``physical_offsets`` (one per record), with
    queue offsets from ``first_queue_offset``; two buffers per record (CRC prefix, tail),
    to be written with one ``pwritev``. Same layout as ``codec.encode``."""
    b = enc.batch
    queue_id, sys_flag, born_ts = b.queue_id, b.sys_flag, b.born_timestamp
    reconsume, hosts, topic = b.reconsume_times, enc.hosts, enc.topic_field
    pack_fixed, pack_prefix = TAIL_FIXED.pack, CRC_PREFIX.pack
    pack_i32, pack_i16 = I32.pack, I16.pack
    join = b"".join
    out: list[bytes] = []
    append = out.append
    queue_offset = first_queue_offset
    for size, body, props, flag, physical in zip(
        enc.sizes[start:stop], b.bodies[start:stop], b.properties[start:stop],
        b.flags[start:stop], physical_offsets, strict=True,
    ):
        tail = join((
            pack_fixed(queue_id, flag, queue_offset, physical, sys_flag, born_ts,
                       store_timestamp, reconsume, 0),
            hosts, pack_i32(len(body)), body, topic, pack_i16(len(props)), props,
        ))
        append(pack_prefix(size, MESSAGE_MAGIC, crc32(tail)))
        append(tail)
        queue_offset += 1
    return out
