"""``mqcluster.common.event_loop``: which loop the server processes run on."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings

import pytest

from mqcluster.common import event_loop


def test_uvloop_unless_the_environment_says_asyncio() -> None:
    assert event_loop.chosen({}) == "uvloop"
    assert event_loop.chosen({event_loop.ENV: " AsyncIO "}) == "asyncio"
    assert event_loop.chosen({event_loop.ENV: ""}) == "uvloop"


def test_an_unknown_loop_is_named_in_the_error() -> None:
    with pytest.raises(event_loop.EventLoopChoiceError,
                       match=r"MQCLUSTER_EVENT_LOOP='tokio' is not one of uvloop, asyncio"):
        event_loop.chosen({event_loop.ENV: "tokio"})


async def _loop_type() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.parametrize(("value", "module"), [("", "uvloop"), ("asyncio", "asyncio")])
def test_run_uses_the_chosen_loop(monkeypatch: pytest.MonkeyPatch, value: str,
                                  module: str) -> None:
    monkeypatch.setenv(event_loop.ENV, value)
    assert event_loop.run(_loop_type()).split(".")[0] == module


def test_a_bad_choice_fails_without_leaving_the_coroutine_unawaited(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.ENV, "tokio")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(event_loop.EventLoopChoiceError):
            event_loop.run(_loop_type())


def test_mqbroker_refuses_an_unknown_loop_naming_the_variable() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mqcluster.broker.main"], capture_output=True, text=True,
        env={"MQCLUSTER_EVENT_LOOP": "tokio", "PATH": "/usr/bin:/bin"}, timeout=60,
        check=False)
    assert done.returncode == 2
    assert "MQCLUSTER_EVENT_LOOP='tokio'" in done.stderr
