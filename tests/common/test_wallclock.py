"""The clock-jump seam: the wall clock of a process moves with the offset a file holds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from mqcluster.common.knob import FileKnob
from mqcluster.common.wallclock import ENV, offset_clock, wall_clock_from_env


def test_offset_follows_the_file(tmp_path: Path) -> None:
    knob_file = tmp_path / "offset"
    mono = [0.0]
    clock = offset_clock(FileKnob(knob_file, monotonic=lambda: mono[0]), lambda: 1000.0)
    assert clock() == 1000.0  # no file: no offset
    knob_file.write_text("-30000")
    mono[0] = 0.1
    assert clock() == 970.0
    knob_file.write_text("60000")
    mono[0] = 0.15
    assert clock() == 970.0  # re-read at most every 100 ms
    mono[0] = 0.2
    assert clock() == 1060.0


def test_unset_is_time_time() -> None:
    assert wall_clock_from_env({}) is time.time


def test_a_process_started_with_the_seam_sees_the_jump(tmp_path: Path) -> None:
    knob_file = tmp_path / "offset"
    knob_file.write_text("3600000")
    out = subprocess.run(
        [sys.executable, "-c", "from mqcluster.broker.messaging.clock import SystemClock;"
                               "print(SystemClock().now_ms())"],
        env={**os.environ, ENV: str(knob_file)}, capture_output=True, text=True, check=True)
    assert abs(int(out.stdout) - (time.time() * 1000 + 3_600_000)) < 30_000
