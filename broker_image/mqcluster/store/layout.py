"""What a store's files must look like before it opens them: segment names, sizes, order.

Checked before anything is written, so a wrong setting or a damaged directory stops
the store with one line naming the file, and the files stay as they were. The segment
sizes the store was written with are recorded in ``storeLayout.json`` (docs/formats.md,
"storeLayout.json"); a store made
before that record existed has them inferred from its files (all but the last segment
are full, and every segment is created at full size).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from mqcluster.common.files import atomic_write, read_file
from mqcluster.store.errors import SegmentSizeChangedError, StoreLayoutError

NAME_WIDTH = 20
COMMITLOG_KEY = "mappedFileSizeCommitLog"
CONSUME_QUEUE_KEY = "mappedFileSizeConsumeQueue"


def segment_name(offset: int) -> str:
    return f"{offset:0{NAME_WIDTH}d}"


@dataclass(frozen=True)
class SegmentFile:
    start: int
    path: str
    size: int


def list_segments(directory: str) -> list[SegmentFile]:
    """The segment files of ``directory`` in offset order. Hidden entries and
    directories are left alone; any other file must be named by its start offset."""
    out = []
    with os.scandir(directory) as entries:
        for e in entries:
            if e.name.startswith(".") or e.is_dir():
                continue
            if len(e.name) != NAME_WIDTH or not e.name.isdigit():
                raise StoreLayoutError(
                    f"{e.path}: not a segment file name (20 digits, the offset of its first "
                    f"byte); move it out of {directory}")
            out.append(SegmentFile(int(e.name), e.path, e.stat().st_size))
    out.sort(key=lambda s: s.start)
    return out


def dirs_with_files(dirs: Iterable[str]) -> Iterator[str]:
    """Those of ``dirs`` holding any segment file (lazily: the first answers a refusal)."""
    for d in dirs:
        if os.path.isdir(d) and list_segments(d):
            yield d


def check_segments(directory: str, found: list[SegmentFile], size: int, key: str,
                   recorded: bool) -> None:
    """Raise unless ``found`` are contiguous segments of ``size`` bytes (the last one
    may be short: a crash between creating and sizing it). ``recorded``: the store's
    record says the files were written with this size (else it is inferred here)."""
    if not found:
        return
    if not recorded:
        _check_inferred_size(directory, found, size, key)
    prev: SegmentFile | None = None
    for i, seg in enumerate(found):
        last = i == len(found) - 1
        if seg.size > size:
            raise StoreLayoutError(f"{seg.path}: {seg.size} bytes, larger than {key}={size}")
        if seg.size < size and not last:
            raise StoreLayoutError(f"{seg.path}: {seg.size} bytes, shorter than {key}={size} "
                                   "and not the last segment: it was cut short")
        if prev is None:
            if seg.start % size:
                raise StoreLayoutError(f"{seg.path}: start offset {seg.start} is not a "
                                       f"multiple of {key}={size}")
        elif seg.start != prev.start + size:
            raise StoreLayoutError(
                f"{directory}: segment {segment_name(prev.start + size)} is missing between "
                f"{os.path.basename(prev.path)} and {os.path.basename(seg.path)}")
        prev = seg


def _check_inferred_size(directory: str, found: list[SegmentFile], size: int,
                         key: str) -> None:
    sized = [s.size for s in found[:-1]] + ([found[-1].size] if found[-1].size else [])
    if not sized or len(set(sized)) != 1 or sized[0] == size:
        return
    written = sized[0]
    if found[0].start % written or any(b.start - a.start != written
                                       for a, b in itertools.pairwise(found)):
        return  # not one consistent older size: the per-file checks name the odd file
    which = (found[0].path if len(found) == 1
             else f"every segment in {directory} ({len(found)}, from {found[0].path})")
    raise SegmentSizeChangedError(
        f"{key}={size}, but {which} is {written} bytes: the store was written with "
        f"{key}={written} (or the file was changed); set it back, or move the store aside")


def load_layout(path: str) -> dict[str, int]:
    """The recorded segment sizes (empty for a store made before they were recorded)."""
    raw = read_file(path)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        out = {k: int(v) for k, v in data.items() if k in (COMMITLOG_KEY, CONSUME_QUEUE_KEY)}
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise StoreLayoutError(f"{path}: unreadable ({exc}); it records the store's "
                               f"segment sizes: fix or remove it") from None
    if any(v <= 0 for v in out.values()):
        raise StoreLayoutError(f"{path}: segment sizes must be positive, got {out}")
    return out


def check_recorded(path: str, recorded: Mapping[str, int], configured: Mapping[str, int],
                   has_files: Mapping[str, Iterable[str]]) -> None:
    """Refuse a configured size that differs from the recorded one while files written
    with the recorded size exist (``has_files[key]``: directories holding segments)."""
    for key, size in configured.items():
        was = recorded.get(key)
        if was is None or was == size:
            continue
        where = next(iter(has_files.get(key, ())), None)
        if where is not None:
            raise SegmentSizeChangedError(
                f"{key}={size}, but the store was written with {key}={was} ({path}; "
                f"segments in {where}): set it back to {was} (or start on an empty store)")


def save_layout(path: str, configured: Mapping[str, int]) -> None:
    atomic_write(path, (json.dumps(dict(sorted(configured.items())), indent=1) + "\n").encode())
