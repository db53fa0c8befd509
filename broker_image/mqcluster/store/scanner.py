"""Sequential walk over commitlog records, reading the segments in large chunks."""

from __future__ import annotations

from collections.abc import Iterator

from mqcluster.store.codec import PREFIX, Checked, RecordKind, check
from mqcluster.store.segment import SegmentedFile

CHUNK = 4 * 1024 * 1024


def scan(files: SegmentedFile, start: int, limit: int, verify_crc: bool,
         chunk: int = CHUNK) -> Iterator[tuple[int, Checked]]:
    """Yield ``(offset, record)`` from ``start`` (a record boundary) up to ``limit``.

    Blank records move on to the next segment. The walk ends after an END, CORRUPT or
    INCOMPLETE record (INCOMPLETE: the record runs past ``limit`` or the written data).
    """
    pos = start
    max_size = files.segment_size
    while pos < limit:
        seg = files.find(pos)
        if seg is None:
            return
        seg_end = min(seg.end, limit)
        if pos >= seg_end:
            return
        want = min(seg_end - pos, chunk)
        buf = seg.read(pos - seg.start, want)
        more = pos + len(buf) < seg_end
        i = 0
        while True:
            c = check(buf, i, pos + i, verify_crc, max_size)
            short = len(buf) - i < max(c.size, PREFIX.size)
            if more and short and c.kind in (RecordKind.INCOMPLETE, RecordKind.END):
                if i == 0:
                    chunk = max(chunk, c.size)
                pos += i
                break
            yield pos + i, c
            if c.kind is RecordKind.BLANK:
                if pos + i + c.size != seg.limit:
                    yield pos + i, Checked(RecordKind.CORRUPT, c.size,
                                           reason="blank record does not end its segment")
                    return
                pos = seg.limit
                break
            if c.kind is not RecordKind.MESSAGE:
                return
            i += c.size
