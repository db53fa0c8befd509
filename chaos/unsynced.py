"""The unsynced-write model of the power-loss filesystem (``chaos.lazyfs``), apart from
FUSE so that it can be tested on its own.

``Overlay`` is one file's bytes written since its last fsync, over the file's durable
bytes (what a callback reads from the backing file): page-sized dirty pages, the size
the file has now, and how far the durable bytes still show through (a truncate hides
what lies past it even when the file grows again). ``plan()`` is what a fsync writes
to the backing file; ``drop`` forgets it all.

``Journal`` is the namespace side: creates, renames, removals and mkdirs happen on
the backing directory at once (so listing and lookups need no model), and each is
journalled with how to undo it until every directory it touched was fsynced, as a
power loss would undo a directory entry that never reached the disk. A removed or
replaced entry is kept in a trash directory until then.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

PAGE = 4096

ReadDurable = Callable[[int, int], bytes]
"""``(offset, size)`` -> up to ``size`` durable bytes there (fewer at the end)."""


@dataclass
class SyncPlan:
    """What a fsync does to the backing file, in this order: truncate it to
    ``cut_to`` (when not None), set its size to ``size``, write ``writes``."""

    cut_to: int | None
    size: int
    writes: list[tuple[int, bytes]]


class Overlay:
    def __init__(self, durable_size: int) -> None:
        self.size = durable_size
        self.visible = durable_size
        """Durable bytes at or past this offset are hidden (read as zeros)."""
        self.durable_size = durable_size
        self.pages: dict[int, bytearray] = {}
        self.dirty = False
        """Anything to fsync (a write, a truncate)."""

    # ------------------------------------------------------------------ reads

    def _durable_page(self, n: int, read_durable: ReadDurable) -> bytearray:
        start = n * PAGE
        shown = max(0, min(PAGE, self.visible - start))
        data = bytearray(read_durable(start, shown) if shown else b"")
        return data + bytes(PAGE - len(data))

    def read(self, offset: int, size: int, read_durable: ReadDurable) -> bytes:
        if offset < 0 or size < 0:
            raise ValueError(f"read at {offset} of {size} bytes")
        end = min(offset + size, self.size)
        out = bytearray()
        pos = offset
        while pos < end:
            n, at = divmod(pos, PAGE)
            take = min(PAGE - at, end - pos)
            page = self.pages.get(n)
            if page is not None:
                out += page[at:at + take]
            elif pos >= self.visible:
                out += bytes(take)
            else:
                shown = min(take, self.visible - pos)
                got = read_durable(pos, shown)
                out += got + bytes(take - len(got))
            pos += take
        return bytes(out)

    # ------------------------------------------------------------------ changes

    def write(self, offset: int, data: bytes, read_durable: ReadDurable) -> None:
        if offset < 0:
            raise ValueError(f"write at {offset}")
        pos, view = offset, memoryview(data)
        while view:
            n, at = divmod(pos, PAGE)
            take = min(PAGE - at, len(view))
            page = self.pages.get(n)
            if page is None:
                page = self.pages[n] = self._durable_page(n, read_durable)
            page[at:at + take] = view[:take]
            pos += take
            view = view[take:]
        self.size = max(self.size, offset + len(data))
        self.dirty = self.dirty or bool(data)

    def truncate(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"truncate to {size}")
        if size < self.size:
            self.visible = min(self.visible, size)
            n, at = divmod(size, PAGE)
            for k in [k for k in self.pages if k > n or (k == n and at == 0)]:
                del self.pages[k]
            if at and n in self.pages:
                self.pages[n][at:] = bytes(PAGE - at)
        self.size = size
        self.dirty = True

    # ------------------------------------------------------------------ sync

    def plan(self) -> SyncPlan:
        cut = self.visible if self.visible < self.durable_size else None
        writes = [(n * PAGE, bytes(p[:max(0, min(PAGE, self.size - n * PAGE))]))
                  for n, p in sorted(self.pages.items()) if n * PAGE < self.size]
        return SyncPlan(cut, self.size, writes)

    def synced(self) -> None:
        """The plan reached the disk: the file's bytes now are its durable bytes."""
        self.durable_size = self.visible = self.size
        self.pages.clear()
        self.dirty = False

    def drop(self) -> int:
        """Forget every unsynced change; how many bytes of pages were dropped."""
        lost = len(self.pages) * PAGE
        self.size = self.visible = self.durable_size
        self.pages.clear()
        self.dirty = False
        return lost

    @property
    def unsynced_bytes(self) -> int:
        return len(self.pages) * PAGE


def apply_plan(plan: SyncPlan, fd: int) -> None:
    """Carry out a fsync's plan on the backing file and fsync it."""
    if plan.cut_to is not None:
        os.ftruncate(fd, plan.cut_to)
    os.ftruncate(fd, plan.size)
    for offset, data in plan.writes:
        view = memoryview(data)
        while view:
            view = view[os.pwrite(fd, view, offset + len(data) - len(view)):]
    os.fsync(fd)


# ---------------------------------------------------------------------- namespace


@dataclass
class Undo:
    """One namespace change not yet durable: ``dirs`` (backing paths) still to be
    fsynced, and how to take it back."""

    dirs: set[str]
    created: str | None = None
    """A file or directory that a power loss removes (with all under it)."""
    moved: tuple[str, str] | None = None
    """``(src, dst)``: renamed back."""
    kept: tuple[str, str] | None = None
    """``(trash, path)``: a removed or replaced entry put back."""


@dataclass
class Journal:
    trash: str
    entries: list[Undo] = field(default_factory=list)
    _n: int = 0

    def _to_trash(self, path: str) -> str:
        self._n += 1
        os.makedirs(self.trash, exist_ok=True)
        kept = os.path.join(self.trash, f"{self._n}-{os.path.basename(path)}")
        os.rename(path, kept)
        return kept

    def create(self, path: str) -> None:
        """``path`` was just created on the backing directory."""
        self.entries.append(Undo({os.path.dirname(path)}, created=path))

    def rename(self, src: str, dst: str) -> None:
        """Rename on the backing directory, keeping what ``dst`` replaces."""
        kept = self._to_trash(dst) if os.path.lexists(dst) else None
        try:
            os.rename(src, dst)
        except OSError:
            if kept is not None:
                os.rename(kept, dst)
            raise
        self.entries.append(Undo({os.path.dirname(src), os.path.dirname(dst)},
                                 moved=(src, dst), kept=(kept, dst) if kept else None))

    def remove(self, path: str) -> None:
        """Unlink or rmdir (an empty directory) on the backing directory, kept in the
        trash until the directory is fsynced."""
        if os.path.isdir(path) and not os.path.islink(path) and os.listdir(path):
            raise OSError(39, "Directory not empty", path)
        kept = self._to_trash(path)
        self.entries.append(Undo({os.path.dirname(path)}, kept=(kept, path)))

    def fsync_dir(self, directory: str) -> None:
        """Every change in ``directory`` is durable there; a change is done with once
        each directory it touched was fsynced."""
        left = []
        for e in self.entries:
            e.dirs.discard(directory)
            if e.dirs:
                left.append(e)
            elif e.kept is not None:
                _remove_tree(e.kept[0])
        self.entries = left

    def undo(self) -> list[str]:
        """Take back every change not yet durable, newest first; what was undone."""
        done = []
        for e in reversed(self.entries):
            try:
                if e.created is not None:
                    _remove_tree(e.created)
                    done.append(f"create {e.created}")
                if e.moved is not None:
                    os.rename(e.moved[1], e.moved[0])
                    done.append(f"rename {e.moved[0]} -> {e.moved[1]}")
                if e.kept is not None:
                    os.rename(*e.kept)
                    done.append(f"remove {e.kept[1]}")
            except OSError as exc:
                done.append(f"could not undo {e}: {exc}")
        self.entries = []
        return done


def _remove_tree(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)
