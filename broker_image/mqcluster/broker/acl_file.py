"""``config/acl.json`` in the store: the users and policies of ACL 2.0, read at start
and again when the file changes (its mtime and size are looked at most once a second).

A file that cannot be read or parsed at start stops the broker with the reason; a bad
edit later keeps the last good contents and logs why.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from mqcluster.auth.model import AclConfig, AclError, parse_acl_config

log = logging.getLogger(__name__)

RECHECK_S = 1.0


def acl_path(store_root: str) -> Path:
    return Path(store_root) / "config" / "acl.json"


def read_acl(path: Path) -> AclConfig:
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return AclConfig()
    except (OSError, ValueError) as exc:
        raise AclError(f"{path}: {exc}") from None
    try:
        return parse_acl_config(raw)
    except AclError as exc:
        raise AclError(f"{path}: {exc}") from None


class AclFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp = self._stat()
        self._config = read_acl(path)
        self._checked = time.monotonic()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def __call__(self) -> AclConfig:
        now = time.monotonic()
        if now - self._checked >= RECHECK_S:
            self._checked = now
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._config = read_acl(self.path)
                    log.info("ACL re-read from %s: %d users, %d acls", self.path,
                             len(self._config.users), len(self._config.acls))
                except AclError as exc:
                    log.error("ACL file not applied, the last good one stays: %s", exc)
        return self._config
