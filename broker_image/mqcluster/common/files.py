"""Crash-safe whole-file replacement: write a temp file, fsync, rename, fsync the directory;
directories made so that their entries are durable too."""

from __future__ import annotations

import contextlib
import os

StrPath = str | os.PathLike[str]


def fsync_dir(path: StrPath) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(path: StrPath) -> None:
    """``os.makedirs``, each new directory's entry fsynced in its parent: a file fsynced
    in a directory whose own entry never reached the disk is lost with it at a power
    loss."""
    missing = []
    at = os.path.abspath(path)
    while not os.path.isdir(at):
        missing.append(at)
        at = os.path.dirname(at)
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made by another thread meanwhile
            os.mkdir(d)
        fsync_dir(os.path.dirname(d))


def atomic_write(path: StrPath, data: bytes) -> None:
    """Replace ``path`` with ``data``; after a crash the file holds the old or the new bytes."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    makedirs_durable(directory)
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)


def read_file(path: StrPath) -> bytes | None:
    """The file's bytes, or ``None`` when it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
