"""Client-side errors."""

from __future__ import annotations


class ClientError(Exception):
    """The request could not be made: no route, broker unreachable, timeout."""


class BrokerError(ClientError):
    """The broker answered with an error code; ``code`` and ``remark`` are its answer."""

    def __init__(self, code: int, remark: str | None, addr: str = "") -> None:
        self.code = code
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"broker error {code}{where}: {self.remark or 'no remark'}")
