"""Every process that reads a RocketMQ-style file stops at start, with one line on stderr
and no traceback, on a misspelt key, a duplicated key or an empty name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROCESSES = {
    "mqbroker": ("mqcluster.broker.main", "brokerName=b\nenableProxy=false\n"),
    "mqnamesrv": ("mqcluster.namesrv.main", "listenPort=0\nbindAddress=127.0.0.1\n"),
    "mqcontroller": ("mqcluster.controller.main",
                     "controllerDLegerGroup=g\nnotifyBrokerRoleChanged=true\n"),
    "mqproxy": ("mqcluster.proxy.main", "brokerName=g\nnamesrvAddr=127.0.0.1:9876\n"),
}

MISTAKES = {
    "misspelt": ("allAckInSyncStatSet=true\n",
                 "unknown key 'allAckInSyncStatSet' on line 4: "
                 "did you mean 'allAckInSyncStateSet'?"),
    "duplicated": ("brokerClusterName=c\nbrokerClusterName=d\n",
                   "key 'brokerClusterName' is set more than once (lines 4, 5)"),
}


def start(tmp_path: Path, module: str, text: str) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "x.conf"
    conf.write_text(text)
    return subprocess.run([sys.executable, "-m", module, "-c", str(conf)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mistake", list(MISTAKES))
@pytest.mark.parametrize("process", list(PROCESSES))
def test_a_careless_file_stops_the_process_with_one_line(
    tmp_path: Path, process: str, mistake: str
) -> None:
    module, base = PROCESSES[process]
    extra, expected = MISTAKES[mistake]
    res = start(tmp_path, module, "# header\n" + base + extra)
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"{process}: ")
    assert expected in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("process", "key"),
    [("mqbroker", "brokerName"), ("mqbroker", "brokerClusterName"),
     ("mqbroker", "dLegerGroup"), ("mqcontroller", "controllerDLegerSelfId"),
     ("mqproxy", "brokerName")],
)
def test_an_empty_name_stops_the_process(tmp_path: Path, process: str, key: str) -> None:
    module, base = PROCESSES[process]
    text = "".join(line + "\n" for line in base.splitlines() if not line.startswith(key))
    res = start(tmp_path, module, f"{text}{key}=\n")
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1, res.stderr
    assert f"key {key!r} on line" in res.stderr and "is empty" in res.stderr


def test_a_rocketmq_key_we_do_not_implement_is_a_warning_naming_it(tmp_path: Path) -> None:
    module, base = PROCESSES["mqbroker"]
    res = start(tmp_path, module,
                base + "sendMessageThreadPoolNums=4\nbrokerName2=x\n")
    assert res.returncode != 0
    assert "RocketMQ key 'sendMessageThreadPoolNums'" in res.stderr
    assert "not implemented" in res.stderr
    assert "unknown key 'brokerName2'" in res.stderr


def test_the_name_server_warns_of_controller_keys_it_does_not_implement(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mqcluster.namesrv.main import build_parser, load

    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=0\ncontrollerDLegerGroup=g\ncontrollerThreadPoolNums=16\n")
    _, props, _ = load(build_parser().parse_args(["-c", str(conf)]))
    assert props["controllerDLegerGroup"] == "g", "the embedded controller's keys pass through"
    assert "RocketMQ key 'controllerThreadPoolNums' on line 3 (ControllerConfig) is not " \
           "implemented" in caplog.text
    assert "controllerDLegerGroup" not in caplog.text
