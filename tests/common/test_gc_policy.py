"""``mqcluster.common.gc_policy``: how often the server processes collect cycles."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mqcluster.common import gc_policy


@pytest.fixture
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_the_default_threshold_unless_the_environment_sets_one() -> None:
    assert gc_policy.threshold({}) == gc_policy.DEFAULT_THRESHOLD
    assert gc_policy.threshold({gc_policy.ENV: " "}) == gc_policy.DEFAULT_THRESHOLD
    assert gc_policy.threshold({gc_policy.ENV: " 700 "}) == 700


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_a_bad_threshold_is_named_in_the_error(value: str) -> None:
    with pytest.raises(gc_policy.GcThresholdError,
                       match=rf"MQCLUSTER_GC_THRESHOLD='{value}' is not a positive whole number"):
        gc_policy.threshold({gc_policy.ENV: value})


@pytest.mark.usefixtures("restored_gc")
def test_apply_sets_the_young_generation_threshold() -> None:
    gc_policy.apply({gc_policy.ENV: "1234"})
    assert gc.get_threshold() == (1234, *gc_policy.OLDER_THRESHOLDS)
    gc_policy.apply({})
    assert gc.get_threshold()[0] == gc_policy.DEFAULT_THRESHOLD


@pytest.mark.usefixtures("restored_gc")
def test_freezing_keeps_what_is_alive_and_frees_startup_cycles() -> None:
    class Node:
        peer: object

    alive = Node()
    alive.peer = alive
    garbage = Node()
    garbage.peer = garbage
    garbage_id = id(garbage)
    del garbage
    gc_policy.freeze_startup()
    assert gc.get_freeze_count() > 0
    assert all(id(o) != garbage_id for o in gc.get_objects() if isinstance(o, Node))
    assert alive.peer is alive


@pytest.mark.parametrize("module", ["mqcluster.broker.main", "mqcluster.controller.main",
                                    "mqcluster.namesrv.main"])
def test_the_servers_refuse_a_bad_threshold_naming_the_variable(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module], capture_output=True, text=True,
        env={gc_policy.ENV: "lots", "PATH": "/usr/bin:/bin"}, timeout=60, check=False)
    assert done.returncode != 0
    assert "MQCLUSTER_GC_THRESHOLD='lots'" in done.stderr
    assert "Traceback" not in done.stderr
