"""One commitlog segment file -> Arrow columns, decoded in bulk.

Record boundaries are found by hopping from size field to size field; every fixed
header field is then gathered for all records at once with NumPy, and the variable
fields (hosts, topic, properties) are located and cut out with vectorized index
arithmetic, not one Python object per message. A record that fails its checks ends
the segment and becomes one row flagged ``corrupt`` (bad magic, size, CRC of the
header fields) or ``truncated`` (the file ends inside it), so a damaged tail never
fails a job. Layout: ``mqcluster.store.codec``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqcluster.store.codec import BLANK_MAGIC, HEADER, MESSAGE_MAGIC, PREFIX

SCHEMA = pa.schema([
    ("replica", pa.string()), ("segment", pa.string()), ("physical_offset", pa.int64()),
    ("size", pa.int32()), ("status", pa.string()), ("reason", pa.string()),
    ("crc_ok", pa.bool_()), ("crc", pa.int64()), ("topic", pa.string()), ("queue_id", pa.int32()),
    ("queue_offset", pa.int64()), ("sys_flag", pa.int32()), ("tags", pa.string()),
    ("keys", pa.string()), ("msg_id", pa.string()), ("born_timestamp", pa.int64()),
    ("store_timestamp", pa.int64()), ("body_length", pa.int32()), ("body", pa.binary()),
])
_PREFIX = PREFIX
_SIZE_MAX = 64 * 1024 * 1024


def _walk(data: bytes, limit: int) -> tuple[list[int], str | None, str]:
    """Record start positions; and how the walk ended: None (clean end), 'corrupt' or
    'truncated', with a reason."""
    starts: list[int] = []
    pos = 0
    n = len(data)
    unpack = _PREFIX.unpack_from
    while pos + 8 <= n:
        size, magic = unpack(data, pos)
        if size == 0 and magic == 0:
            return starts, None, ""
        if magic == BLANK_MAGIC:
            return starts, None, ""
        if magic != MESSAGE_MAGIC:
            return starts, "corrupt", f"bad magic code {magic & 0xFFFFFFFF:#x} at {pos}"
        if size < HEADER.size or size > limit:
            return starts, "corrupt", f"bad total size {size} at {pos}"
        if pos + size > n:
            return starts, "truncated", f"record of {size} bytes runs past the file end"
        starts.append(pos)
        pos += size
    if pos < n and any(data[pos:]):
        return starts, "truncated", "the file ends inside a record header"
    return starts, None, ""


def _torn(data: bytes, start: int, size: int) -> bool:
    """A preallocated file's torn tail: the record ends in zeros and nothing follows."""
    end = start + size
    return not any(data[end - 8:end]) and not any(data[end:end + 4096])


def _gather(arr: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    return arr[at[:, None] + np.arange(width)[None, :]]


def _be(arr: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    big = np.dtype(dtype)
    raw = _gather(arr, at, big.itemsize).copy().view(big).reshape(-1)
    return raw.astype(big.newbyteorder("="))


def _cut(arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The byte ranges ``[start, start+length)`` as one Arrow binary array."""
    lengths = lengths.astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    idx = np.repeat(starts.astype(np.int64) - offsets[:-1], lengths) + np.arange(total)
    data = arr[idx] if total else np.zeros(0, dtype=np.uint8)
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())])


def _prop(props: pa.Array, name: str) -> pa.Array:
    pattern = f"(?:^|\x02){name}\x01(?P<v>[^\x02]*)"
    found = pc.extract_regex(props, pattern)
    return pc.struct_field(found, "v")


def decode_segment(data: bytes, base_offset: int, replica: str, segment: str,
                   with_body: bool = False, verify_crc: bool = True) -> pa.RecordBatch:
    """Every record of one segment's bytes as a record batch of ``SCHEMA``."""
    starts_list, bad, reason = _walk(data, min(len(data), _SIZE_MAX))
    n = len(starts_list)
    arr = np.frombuffer(data, dtype=np.uint8)
    starts = np.asarray(starts_list, dtype=np.int64)
    size = _be(arr, starts, ">i4") if n else np.zeros(0, np.int32)
    queue_id = _be(arr, starts + 12, ">i4") if n else np.zeros(0, np.int32)
    queue_offset = _be(arr, starts + 20, ">i8") if n else np.zeros(0, np.int64)
    physical = _be(arr, starts + 28, ">i8") if n else np.zeros(0, np.int64)
    sys_flag = _be(arr, starts + 36, ">i4") if n else np.zeros(0, np.int32)
    born_ts = _be(arr, starts + 40, ">i8") if n else np.zeros(0, np.int64)
    store_ts = _be(arr, starts + 48, ">i8") if n else np.zeros(0, np.int64)
    p = starts + HEADER.size
    born_len = arr[p].astype(np.int64) if n else np.zeros(0, np.int64)
    p = p + 1 + born_len
    store_len = arr[p].astype(np.int64) if n else np.zeros(0, np.int64)
    p = p + 1 + store_len
    body_len = _be(arr, p, ">i4").astype(np.int64) if n else np.zeros(0, np.int64)
    body_at = p + 4
    p = body_at + body_len
    topic_len = _be(arr, p, ">i2").astype(np.int64) if n else np.zeros(0, np.int64)
    topic_at = p + 2
    p = topic_at + topic_len
    props_len = _be(arr, p, ">i2").astype(np.int64) if n else np.zeros(0, np.int64)
    props_at = p + 2
    layout_ok = (props_at + props_len == starts + size) if n else np.zeros(0, bool)
    stored_crc = _be(arr, starts + 8, ">u4") if n else np.zeros(0, np.uint32)
    if verify_crc and n:
        view = memoryview(data)
        crc_ok = np.fromiter((zlib.crc32(view[s + 12:s + z]) == c for s, z, c in
                              zip(starts_list, size.tolist(), stored_crc.tolist(), strict=True)),
                             dtype=bool, count=n)
    else:
        crc_ok = np.ones(n, dtype=bool)
    crc_ok &= layout_ok
    status = np.where(crc_ok, "ok", "corrupt").astype(object)
    reasons = np.where(crc_ok, "", "CRC or field lengths do not match").astype(object)
    if n and not crc_ok[-1] and _torn(data, starts_list[-1], int(size[-1])):
        status[-1] = "truncated"
        reasons[-1] = "the last record was not written whole (zeros at its end)"
    topics = _cut(arr, topic_at, topic_len).cast(pa.string())
    props = _cut(arr, props_at, props_len).cast(pa.string())
    uniq = _prop(props, "UNIQ_KEY")
    columns = {
        "replica": pa.array([replica] * n, pa.string()),
        "segment": pa.array([segment] * n, pa.string()),
        "physical_offset": pa.array(base_offset + starts, pa.int64()),
        "size": pa.array(size, pa.int32()),
        "status": pa.array(status, pa.string()),
        "reason": pa.array(reasons, pa.string()),
        "crc_ok": pa.array(crc_ok, pa.bool_()),
        "crc": pa.array(stored_crc.astype(np.int64), pa.int64()),
        "topic": topics,
        "queue_id": pa.array(queue_id, pa.int32()),
        "queue_offset": pa.array(queue_offset, pa.int64()),
        "sys_flag": pa.array(sys_flag, pa.int32()),
        "tags": _prop(props, "TAGS"),
        "keys": _prop(props, "KEYS"),
        "msg_id": uniq,
        "born_timestamp": pa.array(born_ts, pa.int64()),
        "store_timestamp": pa.array(store_ts, pa.int64()),
        "body_length": pa.array(body_len, pa.int32()),
        "body": _cut(arr, body_at, body_len) if with_body else pa.nulls(n, pa.binary()),
    }
    del physical
    batch = pa.RecordBatch.from_pydict(columns, schema=SCHEMA)
    if bad is None:
        return batch
    tail_at = (starts_list[-1] + int(size[-1])) if n else 0
    flagged = pa.RecordBatch.from_pylist([{
        "replica": replica, "segment": segment, "physical_offset": base_offset + tail_at,
        "size": len(data) - tail_at, "status": bad, "reason": reason, "crc_ok": False,
    }], schema=SCHEMA)
    return pa.Table.from_batches([batch, flagged]).combine_chunks().to_batches()[0]


def segment_files(commitlog_dir: Path) -> list[Path]:
    return sorted(p for p in commitlog_dir.iterdir() if p.name.isdigit())


def read_segment(path: Path, replica: str, with_body: bool = False,
                 verify_crc: bool = True) -> pa.RecordBatch:
    return decode_segment(path.read_bytes(), int(path.name), replica, path.name, with_body,
                          verify_crc)


def record_count(data: bytes) -> int:
    return len(_walk(data, min(len(data), _SIZE_MAX))[0])


__all__ = ["SCHEMA", "decode_segment", "read_segment", "record_count", "segment_files",
           "struct"]
