"""``python -m chaos.lazyfs MOUNT BACKING [--report FILE]``: a FUSE passthrough
filesystem that loses, on command, every write not yet fsynced, as a power loss does
(after Jepsen's LazyFS).

File contents written through MOUNT stay in this process's memory (``chaos.unsynced``)
until the file is fsynced (or fdatasynced); creates, renames, removals and mkdirs stay
undoable until their directory is fsynced. Writing ``drop`` to the hidden control file
``MOUNT/.lazyfs`` forgets all of that at once: from then on MOUNT serves the last synced
state, which is what BACKING holds. Each drop appends one JSON line to the report file
(bytes and files lost, namespace changes undone). A clean unmount drops as well, so
whatever was not fsynced never reaches BACKING.

The kernel caches neither attributes nor lookups (timeouts 0), and file pages are
re-read at each open, so a process that opens a file after a drop reads the synced
state; a power-loss fault kills the processes that use MOUNT before it drops.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mfusepy

from chaos.unsynced import Journal, Overlay, apply_plan

CONTROL = "/.lazyfs"
CONTROL_FH = 1 << 62


@dataclass
class Node:
    """One open (or still unsynced) file: its backing fd and its unsynced bytes."""

    fd: int
    overlay: Overlay
    handles: int = 0

    def read_durable(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)


def _err(code: int) -> mfusepy.FuseOSError:
    return mfusepy.FuseOSError(code)


class LazyFS(mfusepy.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, backing: str, report: str | None = None) -> None:
        self.root = os.path.realpath(backing)
        self.report = report
        self.journal = Journal(self.root.rstrip("/") + ".lazyfs-trash")
        self.nodes: dict[str, Node] = {}
        """By backing path, every file open or holding unsynced bytes."""
        self.handles: dict[int, Node] = {}
        self._fh = 1
        self.mutex = threading.Lock()  # libfuse may call from several threads
        self.drops = 0

    # ------------------------------------------------------------------ helpers

    def real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _node(self, real: str) -> Node:
        node = self.nodes.get(real)
        if node is None:
            try:
                fd = os.open(real, os.O_RDWR)
            except IsADirectoryError:
                raise _err(errno.EISDIR) from None
            except PermissionError:
                fd = os.open(real, os.O_RDONLY)
            node = self.nodes[real] = Node(fd, Overlay(os.fstat(fd).st_size))
        return node

    def _handle(self, node: Node) -> int:
        fh = self._fh
        self._fh += 1
        node.handles += 1
        self.handles[fh] = node
        return fh

    def _forget(self, real: str) -> None:
        """Close a node nothing holds open and nothing unsynced."""
        node = self.nodes.get(real)
        if node is not None and node.handles == 0 and not node.overlay.dirty:
            del self.nodes[real]
            os.close(node.fd)

    def _moved(self, old: str, new: str) -> None:
        """Nodes follow a rename (of the file, or of a directory above it)."""
        for path in [p for p in self.nodes if p == old or p.startswith(old + "/")]:
            self.nodes[new + path[len(old):]] = self.nodes.pop(path)

    # ------------------------------------------------------------------ control

    def drop(self) -> dict[str, Any]:
        """Power loss: forget unsynced bytes, undo namespace changes not durable."""
        lost_bytes = 0
        files = 0
        for node in self.nodes.values():
            if node.overlay.dirty:
                files += 1
            lost_bytes += node.overlay.drop()
        undone = self.journal.undo()
        for real in list(self.nodes):
            node = self.nodes[real]
            if node.handles == 0:
                del self.nodes[real]
                os.close(node.fd)
        self.drops += 1
        said = {"drop": self.drops, "time": time.time(), "files": files,
                "unsynced_bytes": lost_bytes, "undone": undone}
        if self.report:
            with open(self.report, "a", encoding="utf-8") as f:
                f.write(json.dumps(said) + "\n")
        return said

    # ------------------------------------------------------------------ metadata

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if path == CONTROL:
            now = time.time_ns()
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": 0,
                    "st_atime": now, "st_mtime": now, "st_ctime": now}
        with self.mutex:
            real = self.real(path)
            node = self.handles.get(fh) if fh is not None else self.nodes.get(real)
            st = os.fstat(node.fd) if node is not None else os.lstat(real)
            attrs = {k: getattr(st, k) for k in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns",
                "st_mtime_ns", "st_ctime_ns", "st_blocks")}
            for k in ("st_atime", "st_mtime", "st_ctime"):
                attrs[k] = attrs.pop(k + "_ns")
            if node is not None:
                attrs["st_size"] = node.overlay.size
            return attrs

    def access(self, path: str, amode: int) -> int:
        if path != CONTROL and not os.access(self.real(path), amode):
            raise _err(errno.EACCES)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self.real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self.real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self.real(path))
        else:
            os.utime(self.real(path), ns=times)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self.root)
        return {k: getattr(st, k) for k in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self.real(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self.real(path))

    # ------------------------------------------------------------------ namespace

    def mkdir(self, path: str, mode: int) -> int:
        with self.mutex:
            real = self.real(path)
            os.mkdir(real, mode)
            self.journal.create(real)
        return 0

    def symlink(self, target: str, source: str) -> int:
        with self.mutex:
            real = self.real(target)
            os.symlink(source, real)
            self.journal.create(real)
        return 0

    def rmdir(self, path: str) -> int:
        with self.mutex:
            self.journal.remove(self.real(path))
        return 0

    def unlink(self, path: str) -> int:
        if path == CONTROL:
            raise _err(errno.EPERM)
        with self.mutex:
            real = self.real(path)
            self.journal.remove(real)
            node = self.nodes.pop(real, None)
            if node is not None:  # open handles go on reading and writing it
                self.nodes[f"{real}\0unlinked{id(node)}"] = node
        return 0

    def rename(self, old: str, new: str) -> int:
        if CONTROL in (old, new):
            raise _err(errno.EPERM)
        with self.mutex:
            src, dst = self.real(old), self.real(new)
            replaced = self.nodes.pop(dst, None)
            if replaced is not None:
                self.nodes[f"{dst}\0replaced{id(replaced)}"] = replaced
            self.journal.rename(src, dst)
            self._moved(src, dst)
        return 0

    # ------------------------------------------------------------------ files

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        if path == CONTROL:
            return CONTROL_FH
        with self.mutex:
            real = self.real(path)
            existed = os.path.lexists(real)
            os.close(os.open(real, os.O_CREAT | os.O_WRONLY, mode))
            if not existed:
                self.journal.create(real)
            node = self._node(real)
            if not existed:
                node.overlay = Overlay(0)
            elif isinstance(fi, int) and fi & os.O_TRUNC:
                node.overlay.truncate(0)
            return self._handle(node)

    def open(self, path: str, flags: int) -> int:
        if path == CONTROL:
            return CONTROL_FH
        with self.mutex:
            node = self._node(self.real(path))
            if flags & os.O_TRUNC:
                node.overlay.truncate(0)
            return self._handle(node)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        if fh == CONTROL_FH:
            return b""
        with self.mutex:
            node = self.handles[fh]
            return node.overlay.read(offset, size, node.read_durable)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if fh == CONTROL_FH:
            command = data.decode(errors="replace").strip()
            if command != "drop":
                raise _err(errno.EINVAL)
            with self.mutex:
                self.drop()
            return len(data)
        with self.mutex:
            node = self.handles[fh]
            node.overlay.write(offset, data, node.read_durable)
        return len(data)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if path == CONTROL or fh == CONTROL_FH:
            return 0
        with self.mutex:
            real = self.real(path) if path else None
            node = self.handles.get(fh) if fh is not None else None
            if node is None and real is not None:
                node = self._node(real)
            if node is None:
                raise _err(errno.EBADF)
            node.overlay.truncate(length)
            if real is not None and node.handles == 0:
                self._forget(real)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        if fh == CONTROL_FH:
            return 0
        with self.mutex:
            node = self.handles[fh]
            if node.overlay.dirty:
                apply_plan(node.overlay.plan(), node.fd)
                node.overlay.synced()
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self.mutex:
            real = self.real(path).rstrip("/") or "/"
            os.fsync(fd := os.open(real, os.O_RDONLY | os.O_DIRECTORY))
            os.close(fd)
            self.journal.fsync_dir(real)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        if fh == CONTROL_FH:
            return 0
        with self.mutex:
            node = self.handles.pop(fh)
            node.handles -= 1
            if node.handles:
                return 0
            for real, n in list(self.nodes.items()):
                # An unlinked file's unsynced bytes die with its last handle.
                if n is node and (not n.overlay.dirty or "\0" in real):
                    del self.nodes[real]
                    os.close(node.fd)
        return 0

    def destroy(self, path: str) -> None:
        """Unmounted: nothing unsynced reaches the backing directory."""
        with self.mutex:
            self.drop()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m chaos.lazyfs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mount", help="an empty directory to mount on")
    p.add_argument("backing", help="the directory whose synced state is served")
    p.add_argument("--report", help="append one JSON line per drop here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    for what, path in (("mount point", a.mount), ("backing directory", a.backing)):
        if not os.path.isdir(path):
            print(f"lazyfs: the {what} {path!r} is not a directory", file=sys.stderr)
            return 2
    fs = LazyFS(a.backing, a.report)
    print(f"lazyfs: serving {fs.root} on {os.path.realpath(a.mount)}", flush=True)
    mfusepy.FUSE(fs, a.mount, foreground=True, nothreads=True, fsname="lazyfs",
                 attr_timeout=0, entry_timeout=0, negative_timeout=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
