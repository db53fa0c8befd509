"""Quoting a received value in an error message."""

from __future__ import annotations


def show(value: object) -> str:
    """``value`` for an error message, cut short: a hostile field may be megabytes."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
