"""The event loop the server processes run on: uvloop, or asyncio's own.

uvloop runs the loop, its transports and its timers in C: a replicated master spends
less CPU per request on it (``python -m bench peers`` prints the CPU per message of
every process). ``MQCLUSTER_EVENT_LOOP=asyncio`` selects asyncio's loop
instead; where uvloop is not installed (it has no Windows build) that is the loop in
any case.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
ENV = "MQCLUSTER_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


class EventLoopChoiceError(ValueError):
    """The environment names an event loop there is not."""


def chosen(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The loop the environment asks for (uvloop when it says nothing)."""
    choice = environ.get(ENV, "").strip().lower() or "uvloop"
    if choice not in CHOICES:
        raise EventLoopChoiceError(
            f"{ENV}={environ[ENV]!r} is not one of {', '.join(CHOICES)}")
    return choice


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the chosen loop."""
    try:
        choice = chosen()
    except EventLoopChoiceError:
        main.close()  # never to run: no "never awaited" warning on top of the error
        raise
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)
