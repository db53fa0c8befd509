"""Why a store cannot be opened: each message is one line that names the file or path."""

from __future__ import annotations


class StoreError(RuntimeError):
    """The store cannot be opened as configured; nothing was written."""


class StoreLockedError(StoreError):
    """Another store (this process or another) has one of this store's paths open."""


class StoreLayoutError(StoreError):
    """A store file is not what this store writes (size, name, a missing segment...)."""


class SegmentSizeChangedError(StoreLayoutError):
    """The configured segment size differs from the one the files were written with."""
