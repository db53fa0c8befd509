"""Credentials in RocketMQ's JSON form: ``{"username": "...", "password": "..."}``
(``initAuthenticationUser``, ``innerClientAuthenticationCredentials``)."""

from __future__ import annotations

import json
from typing import NamedTuple


class Credentials(NamedTuple):
    access_key: str
    secret_key: str


def credentials_of(text: str) -> Credentials:
    """Parse the JSON form; a ValueError names what is wrong (never the password)."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError('not JSON; expected {"username": ..., "password": ...}') from None
    if not isinstance(raw, dict):
        raise ValueError('expected {"username": ..., "password": ...}')
    name, password = raw.get("username"), raw.get("password")
    if not isinstance(name, str) or not name:
        raise ValueError("username is missing or empty")
    if not isinstance(password, str) or not password:
        raise ValueError(f"password of {name!r} is missing or empty")
    return Credentials(name, password)
